package ec_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/ec"
)

// FuzzPrefillParams gives the connectors up to three arbitrary encode
// answers (n picks how many; seeds here and in
// testdata/fuzz/FuzzPrefillParams). They must not panic. ec-nixl must
// refuse malformed JSON; when it succeeds its answer holds every mm_hash
// with a non-null descriptor, each with the first such descriptor's bytes
// (whitespace aside), or is nil when there is none; feeding it back in gives
// it again, and so does adding the same descriptors again with their keys
// reordered and reindented. ec-shared-storage answers nil whatever it gets.
func FuzzPrefillParams(f *testing.F) {
	for _, seed := range []struct {
		a, b, c string
		n       uint8
	}{
		{descA, "", "", 1},
		{`{"h1":` + descA + `}`, `{"h2":` + descB + `}`, `{"h1":` + descA + `}`, 3},
		{`{"h1":` + descA + `}`, `{"h1":` + descA2 + `}`, "", 2},
		{`{"h1":null,"h2":{"n":1}}`, `{"h2":{"n":1.0}}`, `null`, 3},
		{`{"h":{"a":1,"b":[1,2]}}`, `{"h":{"b":[1,2],"a":1}}`, `[]`, 3},
		{`{"h":1e400}`, `{"h":1E400}`, "", 2},
		{`{"h":1}`, `{"h":{"a":1`, "", 2},
		{"{\"h\":\"\xff\"}", "", "", 1},
		{"", "", "", 0},
	} {
		f.Add([]byte(seed.a), []byte(seed.b), []byte(seed.c), seed.n)
	}
	nixl := ec.NewNIXL()
	f.Fuzz(func(t *testing.T, a, b, c []byte, n uint8) {
		in := make([]json.RawMessage, int(n%4))
		for i, raw := range [][]byte{a, b, c}[:len(in)] {
			if len(raw) > 0 {
				in[i] = bytes.Clone(raw)
			}
		}
		shared, err := ec.NewSharedStorage().PrefillParams(in)
		require.NoError(t, err)
		assert.Nil(t, shared)

		got, err := nixl.PrefillParams(in)
		first, malformed := firstDescriptors(in)
		if malformed {
			assert.Error(t, err, "malformed JSON is refused")
			return
		}
		if err != nil {
			assert.ErrorContains(t, err, "conflicting descriptors")
			return
		}
		if len(first) == 0 {
			assert.Nil(t, got)
			return
		}
		for _, raw := range in {
			if !utf8.Valid(raw) {
				return // encoding/json keeps invalid UTF-8 in values; jsonbody refused it upstream
			}
		}
		require.True(t, json.Valid(got), "%s", got)
		var merged map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(got, &merged))
		members := make(map[string]string, len(merged))
		for k, v := range merged {
			members[k] = string(v)
		}
		assert.Equal(t, first, members)

		again, err := nixl.PrefillParams([]json.RawMessage{got})
		require.NoError(t, err)
		assert.Equal(t, string(got), string(again), "a result fed back in comes back the same")
		again, err = nixl.PrefillParams(append(in, reindent(t, got)))
		require.NoError(t, err, "the same descriptors, reordered and reindented, do not conflict")
		assert.Equal(t, string(got), string(again))
	})
}

// firstDescriptors is, for each mm_hash of the answers in order, the
// compact bytes of its first non-null descriptor; malformed is true when an
// answer is not JSON (empty answers and non-objects carry none).
func firstDescriptors(in []json.RawMessage) (first map[string]string, malformed bool) {
	first = map[string]string{}
	for _, raw := range in {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if !json.Valid(raw) {
			return nil, true
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			continue
		}
		for k, v := range obj {
			if _, seen := first[k]; !seen && string(bytes.TrimSpace(v)) != "null" {
				var b bytes.Buffer
				_ = json.Compact(&b, v)
				first[k] = b.String()
			}
		}
	}
	return first, false
}

// reindent writes the same JSON value with object keys in sorted order and
// two-space indentation, numbers spelled as they were.
func reindent(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	out, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return out
}
