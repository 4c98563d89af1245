package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestValidAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"empty object", `{}`},
		{"empty array", `[]`},
		{"null", `null`},
		{"true", `true`},
		{"false", `false`},
		{"zero", `0`},
		{"negative zero", `-0`},
		{"fraction", `-12.5`},
		{"exponent", `1E+2`},
		{"exponent lower minus", `1.0e-2`},
		{"string", `"hi"`},
		{"empty string", `""`},
		{"all short escapes", `"\"\\\/\b\f\n\r\t"`},
		{"unicode escapes", `"\u00e9\uD83D\uDE00\uFFFF"`},
		{"lone surrogate escape", `"\ud800"`},
		{"raw DEL and non-ASCII", "\"\x7f\u00e9\u4e16\""},
		{"surrounding whitespace", " \t\r\n{\"a\" : [ 1 , { } ] }\n\t "},
		{"nested", `{"a":{"b":{"c":[1,[2,[3,{"d":null}]]]}}}`},
		{"duplicate keys", `{"a":1,"a":2}`},
		{"escaped key", `{"\u0061\n":1}`},
		{"long string", `"` + strings.Repeat("abcdefghijklmnop", 1000) + `"`},
		{"escape at word boundary", `"1234567\n123456789012345\"x"`},
		{"max depth", strings.Repeat("[", jsonbody.MaxDepth) + strings.Repeat("]", jsonbody.MaxDepth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, json.Valid([]byte(tt.in)), "case must be valid for encoding/json")
			assert.NoError(t, jsonbody.Valid([]byte(tt.in)))
		})
	}
}

func TestValidRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // full error text
	}{
		{"empty", ``, "unexpected end of JSON input at offset 0"},
		{"only space", "  \n", "unexpected end of JSON input at offset 3"},
		{"BOM", "\xef\xbb\xbf{}", `invalid character 'ï' looking for beginning of value at offset 0`},
		{"trailing garbage", `{"a":1} x`, "invalid character 'x' after top-level value at offset 8"},
		{"two values", `{} {}`, "invalid character '{' after top-level value at offset 3"},
		{"trailing comma object", `{"a":1,}`, "invalid character '}' looking for beginning of object key string at offset 7"},
		{"trailing comma array", `[1,]`, "invalid character ']' looking for beginning of value at offset 3 (in [1])"},
		{"missing colon", `{"a" 1}`, "invalid character '1' after object key at offset 5 (in a)"},
		{"missing comma", `{"a":1 "b":2}`, `invalid character '"' after object key:value pair at offset 7 (in a)`},
		{"array missing comma", `[1 2]`, "invalid character '2' after array element at offset 3 (in [0])"},
		{"mismatched close", `[1}`, "invalid character '}' after array element at offset 2 (in [0])"},
		{"unquoted key", `{a:1}`, "invalid character 'a' looking for beginning of object key string at offset 1"},
		{"single quotes", `'a'`, `invalid character '\'' looking for beginning of value at offset 0`},
		{"unclosed object", `{"a":1`, "unexpected end of JSON input at offset 6 (in a)"},
		{"unclosed string", `"abc`, "unexpected end of JSON input at offset 4"},
		{"long unclosed string", `"` + strings.Repeat("x", 100), "unexpected end of JSON input at offset 101"},
		{"control char in string", "\"ab\x01\"", `invalid character '\x01' in string literal at offset 3`},
		{"newline in long string", "\"0123456789abcdef\n\"", `invalid character '\n' in string literal at offset 17`},
		{"tab in string", "\"a\tb\"", `invalid character '\t' in string literal at offset 2`},
		{"bad escape", `"\x"`, "invalid character 'x' in string escape code at offset 2"},
		{"single quote escape", `"\'"`, `invalid character '\'' in string escape code at offset 2`},
		{"short unicode escape", `"\u12"`, `invalid character '"' in \u hexadecimal character escape at offset 5`},
		{"bad hex", `"\u12g4"`, `invalid character 'g' in \u hexadecimal character escape at offset 5`},
		{"leading zero", `01`, "invalid character '1' after top-level value at offset 1"},
		{"leading plus", `+1`, "invalid character '+' looking for beginning of value at offset 0"},
		{"bare minus", `-`, "unexpected end of JSON input at offset 1"},
		{"minus letter", `-a`, "invalid character 'a' in numeric literal at offset 1"},
		{"dot without digits", `1.`, "unexpected end of JSON input at offset 2"},
		{"dot then letter", `1.e1`, "invalid character 'e' after decimal point in numeric literal at offset 2"},
		{"leading dot", `.5`, "invalid character '.' looking for beginning of value at offset 0"},
		{"empty exponent", `1e+`, "unexpected end of JSON input at offset 3"},
		{"bad exponent", `1ex`, "invalid character 'x' in exponent of numeric literal at offset 2"},
		{"hex number", `0x1`, "invalid character 'x' after top-level value at offset 1"},
		{"NaN", `NaN`, "invalid character 'N' looking for beginning of value at offset 0"},
		{"bad literal", `trve`, "invalid character 'v' in literal true (expecting 'u') at offset 2"},
		{"short literal", `nul`, "unexpected end of JSON input at offset 3"},
		{"capital literal", `True`, "invalid character 'T' looking for beginning of value at offset 0"},
		{"literal in object", `{"a":fals}`, "invalid character '}' in literal false (expecting 'e') at offset 9 (in a)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.False(t, json.Valid([]byte(tt.in)), "case must be invalid for encoding/json")
			err := jsonbody.Valid([]byte(tt.in))
			var se *jsonbody.SyntaxError
			require.ErrorAs(t, err, &se)
			assert.EqualError(t, err, tt.want)
		})
	}
}

func TestValidDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []byte
		tooDeep bool
	}{
		{"arrays at max depth", nest("[", "]", jsonbody.MaxDepth), false},
		{"arrays one past max depth", nest("[", "]", jsonbody.MaxDepth+1), true},
		{"objects one past max depth", nest(`{"a":`, "}", jsonbody.MaxDepth+1), true},
		{"mixed past max depth", nest(`[{"a":`, "}]", jsonbody.MaxDepth/2+1), true},
		{"1 MB of open brackets", bytes.Repeat([]byte("["), 1<<20), true},
		{"1 MB of open objects", bytes.Repeat([]byte(`{"":`), 1<<18), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := jsonbody.Valid(tt.in)
			if !tt.tooDeep {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, jsonbody.ErrTooDeep)
			assert.ErrorContains(t, err, "json nesting exceeds max depth (512) at offset")
			_, err = jsonbody.ParseArray(tt.in)
			assert.ErrorIs(t, err, jsonbody.ErrTooDeep)
		})
	}
}

// nest returns open repeated n times, the value 1, then close repeated n times.
func nest(open, close string, n int) []byte {
	return []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
}

func TestSyntaxErrorOffsetMatchesInput(t *testing.T) {
	t.Parallel()
	in := []byte(`{"model":"m","n":[1,2,x]}`)
	err := jsonbody.Valid(in)
	var se *jsonbody.SyntaxError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, byte('x'), in[se.Offset])
	assert.Equal(t, "invalid character 'x' looking for beginning of value", se.Msg)
}
