package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// The string scanner reads 8 and 16 bytes at a time; these tests put every
// byte value, and pairs of tricky ones, at every position across those word
// boundaries and compare with encoding/json plus UTF-8 validation.

func TestStringEveryByteAtEveryPosition(t *testing.T) {
	t.Parallel()
	const n = 34
	for p := range n {
		for b := range 256 {
			in := bytes.Repeat([]byte("a"), n)
			in[p] = byte(b)
			doc := append(append([]byte(`{"k":"`), in...), `"}`...)
			checkDoc(t, doc)
		}
	}
}

func TestStringPairsAtWordBoundaries(t *testing.T) {
	t.Parallel()
	tricky := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '\\', 'u', 'n', '0', 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0x9f, 0xff}
	const n = 20
	for p1 := range n {
		for p2 := p1 + 1; p2 < n; p2++ {
			for _, b1 := range tricky {
				for _, b2 := range tricky {
					in := bytes.Repeat([]byte("x"), n)
					in[p1], in[p2] = b1, b2
					checkDoc(t, append(append([]byte(`"`), in...), '"'))
				}
			}
		}
	}
}

func checkDoc(t *testing.T, doc []byte) {
	t.Helper()
	want := validJSON(doc)
	if err := jsonbody.Valid(doc); (err == nil) != want {
		require.Failf(t, "Valid disagrees with encoding/json", "%q: err %v, valid %v", doc, err, want)
	}
	if !want || doc[0] != '"' {
		return
	}
	var s string
	require.NoError(t, json.Unmarshal(doc, &s))
	got, ok := jsonbody.String(doc)
	if !ok || got != s {
		assert.Failf(t, "String disagrees with encoding/json", "%q: got %q %v, want %q", doc, got, ok, s)
	}
}

// validJSON is what jsonbody accepts (below MaxDepth): valid for
// encoding/json, and valid UTF-8 (outside strings any non-ASCII byte is
// already a syntax error).
func validJSON(data []byte) bool { return json.Valid(data) && utf8.Valid(data) }
