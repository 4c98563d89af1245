package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestAppendString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", `""`},
		{"plain", "hello", `"hello"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short control escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other control characters", "\x00\x1f", `"\u0000\u001f"`},
		{"DEL kept", "\x7f", "\"\x7f\""},
		{"HTML kept", "<a&b>", `"<a&b>"`},
		{"slash kept", "a/b", `"a/b"`},
		{"utf-8 kept", "café 😀", `"café 😀"`},
		{"line separators escaped", "a\u2028b\u2029", `"a\u2028b\u2029"`},
		{"invalid utf-8 replaced", "a\xffb\xc3", `"a\ufffdb\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := jsonbody.AppendString([]byte("x"), tt.in)
			assert.Equal(t, "x"+tt.want, string(got))

			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(tt.in))
			assert.Equal(t, buf.String(), tt.want+"\n", "differs from encoding/json")
		})
	}
}

func TestAppendUint32s(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ids  []uint32
		want string
	}{
		{"nil", nil, `[]`},
		{"empty", []uint32{}, `[]`},
		{"one", []uint32{0}, `[0]`},
		{"several", []uint32{1, 22, 333, math.MaxUint32}, `[1,22,333,4294967295]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := jsonbody.AppendUint32s([]byte("ids="), tt.ids)
			assert.Equal(t, "ids="+tt.want, string(got))
			back, err := jsonbody.Uint32s(got[len("ids="):])
			require.NoError(t, err)
			assert.Equal(t, len(tt.ids), len(back))
		})
	}
}
