package jsonbody_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestValidRejectsInvalidUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // full error text
	}{
		{"lone continuation byte", "\"\x80\"", "invalid UTF-8 in string literal at offset 1"},
		{"0xff", "\"ab\xff\"", "invalid UTF-8 in string literal at offset 3"},
		{"truncated sequence", "\"\xe2\x82\"", "invalid UTF-8 in string literal at offset 1"},
		{"overlong encoding", "\"\xc0\xaf\"", "invalid UTF-8 in string literal at offset 1"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8 in string literal at offset 1"},
		{"past U+10FFFF", "\"\xf4\x90\x80\x80\"", "invalid UTF-8 in string literal at offset 1"},
		{"after valid runes", "\"日本\xff\"", "invalid UTF-8 in string literal at offset 7"},
		{"past the first word", `"` + strings.Repeat("a", 20) + "\xfe\"", "invalid UTF-8 in string literal at offset 21"},
		{"in a member", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \xff\"}]}",
			"invalid UTF-8 in string literal at offset 54 (in messages[0].content)"},
		{"in a key", "{\"a\":1,\"b\xff\":2}", "invalid UTF-8 in string literal at offset 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := jsonbody.Valid([]byte(tt.in))
			var se *jsonbody.SyntaxError
			require.ErrorAs(t, err, &se)
			assert.EqualError(t, err, tt.want)
			_, ok := jsonbody.String([]byte(tt.in))
			assert.False(t, ok, "String refuses it too")
		})
	}
}

func TestValidAcceptsEveryValidUTF8Length(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"é", "世", "😀", "\u007f", "\u0080", "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff"} {
		doc := `{"k":"x` + s + strings.Repeat(s, 9) + `"}`
		assert.NoError(t, jsonbody.Valid([]byte(doc)), "%q", s)
		o, err := jsonbody.ParseObject([]byte(doc))
		require.NoError(t, err)
		raw, _ := o.Get("k")
		got, ok := jsonbody.String(raw)
		require.True(t, ok)
		assert.Equal(t, "x"+strings.Repeat(s, 10), got)
	}
}

func TestSyntaxErrorPath(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 100)
	tests := []struct {
		name string
		in   string
		path string
	}{
		{"top level", `{"a":1,}`, ""},
		{"member value", `{"model":x}`, "model"},
		{"array element", `{"prompt":[1,2,x]}`, "prompt[2]"},
		{"nested", `{"a":{"b":[{"c":[0,{"d":tru}]}]}}`, "a.b[0].c[1].d"},
		{"second member", `{"a":[1],"b":{"c":1,"d":x}}`, "b.d"},
		{"closed siblings are left", `{"a":{"x":[1,2]},"b":[[1],[2,x]]}`, "b[1][1]"},
		{"quoted key", `{"a b":x}`, `["a b"]`},
		{"escaped key", `{"\u0061":x}`, "a"},
		{"key with a dot", `{"a.b":{"c":x}}`, `["a.b"].c`},
		{"long key is cut", `{"` + long + `":x}`, `["` + long[:64] + `..."]`},
		{"strings with brackets do not count", `{"s":"[{,","t":x}`, "t"},
		{"truncated in a member", `{"a":[1`, "a[0]"},
		{"bad key", `{"a":1,x}`, ""},
		{"deep path is cut", strings.Repeat(`{"k":`, 40) + "x", strings.Repeat("k.", 31) + "k..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := jsonbody.ParseObject([]byte(tt.in))
			var se *jsonbody.SyntaxError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.path, se.Path)
			if tt.path != "" {
				assert.True(t, strings.HasSuffix(err.Error(), " (in "+tt.path+")"), err.Error())
			}
		})
	}
}

func TestSyntaxErrorPathFromEveryEntryPoint(t *testing.T) {
	t.Parallel()
	in := []byte(`[1,{"a":x}]`)
	_, err := jsonbody.ParseArray(in)
	assert.ErrorContains(t, err, "(in [1].a)")
	_, err = jsonbody.Uint32s(in)
	assert.ErrorContains(t, err, "(in [1].a)")
	assert.ErrorContains(t, jsonbody.Valid(in), "(in [1].a)")
}
