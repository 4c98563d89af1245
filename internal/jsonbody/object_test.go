package jsonbody_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestParseObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		keys   []string
		values []string // raw value of each key via Get, in keys order
		bytes  string
	}{
		{"empty", `{}`, []string{}, nil, `{}`},
		{"empty with space", " { \n } ", []string{}, nil, `{}`},
		{
			"scalars", `{"s":"x","n":-1.5e3,"t":true,"f":false,"z":null}`,
			[]string{"s", "n", "t", "f", "z"}, []string{`"x"`, `-1.5e3`, `true`, `false`, `null`},
			`{"s":"x","n":-1.5e3,"t":true,"f":false,"z":null}`,
		},
		{
			"whitespace between members is dropped, inside values kept", "\n{ \"a\" :\t[ 1, 2 ] ,\r\n\"b\" : { \"c\" : 1 } }\n",
			[]string{"a", "b"}, []string{`[ 1, 2 ]`, `{ "c" : 1 }`},
			`{"a":[ 1, 2 ],"b":{ "c" : 1 }}`,
		},
		{
			"escaped keys are unescaped for lookup, kept for output", `{"\u0061":1,"b\"c":2,"\ud83d\ude00":3,"\/":4}`,
			[]string{"a", `b"c`, "\U0001F600", "/"}, []string{`1`, `2`, `3`, `4`},
			`{"\u0061":1,"b\"c":2,"\ud83d\ude00":3,"\/":4}`,
		},
		{
			"duplicate keys: Get returns the last", `{"a":1,"b":2,"a":3}`,
			[]string{"a", "b", "a"}, []string{`3`, `2`, `3`}, `{"a":1,"b":2,"a":3}`,
		},
		{
			"escaped value kept byte for byte", `{"p":"line\nbreak \u00e9 \/"}`,
			[]string{"p"}, []string{`"line\nbreak \u00e9 \/"`}, `{"p":"line\nbreak \u00e9 \/"}`,
		},
		{
			"nested containers", `{"m":[{"role":"user","content":[{"type":"text","text":"}]"}]}]}`,
			[]string{"m"}, []string{`[{"role":"user","content":[{"type":"text","text":"}]"}]}]`},
			`{"m":[{"role":"user","content":[{"type":"text","text":"}]"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := jsonbody.ParseObject([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, len(tt.keys), o.Len())
			assert.Equal(t, tt.keys, o.Keys())
			for i, k := range tt.keys {
				v, ok := o.Get(k)
				assert.True(t, ok, "Get(%q)", k)
				assert.Equal(t, tt.values[i], string(v), "Get(%q)", k)
			}
			_, ok := o.Get("missing")
			assert.False(t, ok)
			assert.Equal(t, tt.bytes, string(o.Bytes()))
		})
	}
}

func TestParseObjectErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		notObject bool   // ErrNotObject
		tooDeep   bool   // ErrTooDeep
		syntax    string // SyntaxError text
	}{
		{name: "null", in: `null`, notObject: true},
		{name: "array", in: ` [1] `, notObject: true},
		{name: "string", in: `"{}"`, notObject: true},
		{name: "number", in: `1`, notObject: true},
		{name: "empty", in: ``, syntax: "unexpected end of JSON input at offset 0"},
		{name: "invalid array", in: `[1,`, syntax: "unexpected end of JSON input at offset 3 (in [1])"},
		{name: "BOM", in: "\xef\xbb\xbf{}", syntax: `invalid character 'ï' looking for beginning of value at offset 0`},
		{name: "trailing garbage", in: `{"a":1}}`, syntax: "invalid character '}' after top-level value at offset 7"},
		{name: "trailing garbage after empty", in: `{} 0`, syntax: "invalid character '0' after top-level value at offset 3"},
		{name: "trailing comma", in: `{"a":1,}`, syntax: "invalid character '}' looking for beginning of object key string at offset 7"},
		{name: "missing value", in: `{"a":}`, syntax: "invalid character '}' looking for beginning of value at offset 5 (in a)"},
		{name: "missing colon", in: `{"a"}`, syntax: "invalid character '}' after object key at offset 4 (in a)"},
		{name: "bad nested", in: `{"a":[1,{"b":tru}]}`, syntax: "invalid character '}' in literal true (expecting 'e') at offset 16 (in a[1].b)"},
		{name: "truncated", in: `{"a":1`, syntax: "unexpected end of JSON input at offset 6 (in a)"},
		{name: "truncated key", in: `{"a`, syntax: "unexpected end of JSON input at offset 3"},
		{name: "control char in key", in: "{\"a\x00\":1}", syntax: `invalid character '\x00' in string literal at offset 3`},
		{name: "too deep", in: `{"a":` + strings.Repeat("[", jsonbody.MaxDepth) + strings.Repeat("]", jsonbody.MaxDepth) + `}`, tooDeep: true},
		{name: "1 MB of brackets", in: `{"a":` + strings.Repeat("[", 1<<20), tooDeep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := jsonbody.ParseObject([]byte(tt.in))
			assert.Nil(t, o)
			switch {
			case tt.notObject:
				assert.ErrorIs(t, err, jsonbody.ErrNotObject)
				assert.EqualError(t, err, "json body is not an object")
			case tt.tooDeep:
				assert.ErrorIs(t, err, jsonbody.ErrTooDeep)
			default:
				var se *jsonbody.SyntaxError
				require.ErrorAs(t, err, &se)
				assert.EqualError(t, err, tt.syntax)
			}
		})
	}
}

func TestParseObjectMaxDepthMember(t *testing.T) {
	t.Parallel()
	// The top-level object is depth 1, so a member may nest MaxDepth-1 more.
	in := `{"a":` + strings.Repeat("[", jsonbody.MaxDepth-1) + strings.Repeat("]", jsonbody.MaxDepth-1) + `}`
	_, err := jsonbody.ParseObject([]byte(in))
	assert.NoError(t, err)
}

func TestParseObjectAliasesInput(t *testing.T) {
	t.Parallel()
	in := []byte(`{"a":"x"}`)
	o, err := jsonbody.ParseObject(in)
	require.NoError(t, err)
	in[6] = 'y'
	v, _ := o.Get("a")
	assert.Equal(t, `"y"`, string(v))
}

func TestObjectSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		key  string
		raw  string
		want string
	}{
		{"replace keeps position", `{"a":1,"b":2,"c":3}`, "b", `"x"`, `{"a":1,"b":"x","c":3}`},
		{"append new key", `{"a":1}`, "b", `[1,2]`, `{"a":1,"b":[1,2]}`},
		{"append to empty", `{}`, "a", `null`, `{"a":null}`},
		{"duplicates collapse into the first", `{"a":1,"b":2,"a":3,"a":4}`, "a", `5`, `{"a":5,"b":2}`},
		{"escaped key matched and kept", `{"m\u0061x":1}`, "max", `2`, `{"m\u0061x":2}`},
		{"new key is escaped", `{}`, "a\"b\n<", `1`, `{"a\"b\n<":1}`},
		{"other members byte for byte", `{"x":"\u00e9\/", "y" : [ 1 ,2 ]}`, "z", `0`, `{"x":"\u00e9\/","y":[ 1 ,2 ],"z":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := jsonbody.ParseObject([]byte(tt.in))
			require.NoError(t, err)
			o.Set(tt.key, []byte(tt.raw))
			got, ok := o.Get(tt.key)
			assert.True(t, ok)
			assert.Equal(t, tt.raw, string(got))
			assert.Equal(t, tt.want, string(o.Bytes()))
			assert.Equal(t, tt.want, string(o.AppendTo(nil)))
		})
	}
}

func TestObjectDelete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		key  string
		want string
	}{
		{"middle", `{"a":1,"b":2,"c":3}`, "b", `{"a":1,"c":3}`},
		{"only", `{"a":1}`, "a", `{}`},
		{"missing", `{"a":1}`, "b", `{"a":1}`},
		{"all duplicates", `{"a":1,"b":2,"a":3}`, "a", `{"b":2}`},
		{"escaped key", `{"\u0062":1,"c":2}`, "b", `{"c":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := jsonbody.ParseObject([]byte(tt.in))
			require.NoError(t, err)
			o.Delete(tt.key)
			_, ok := o.Get(tt.key)
			assert.False(t, ok)
			assert.Equal(t, tt.want, string(o.Bytes()))
		})
	}
}

func TestObjectDuplicateKey(t *testing.T) {
	t.Parallel()
	many := `{`
	for i := range 40 {
		many += fmt.Sprintf(`"k%d":0,`, i)
	}
	tests := []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"none", `{"a":1,"b":2}`, "", false},
		{"empty object", `{}`, "", false},
		{"one", `{"a":1,"a":2}`, "a", true},
		{"second occurrence first wins", `{"a":1,"b":2,"b":3,"a":4}`, "b", true},
		{"escapes compared unescaped", `{"a":1,"\u0061":2}`, "a", true},
		{"empty key", `{"":1,"":2}`, "", true},
		{"many members, none", many + `"z":0}`, "", false},
		{"many members, one", many + `"k3":1}`, "k3", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := jsonbody.ParseObject([]byte(tt.in))
			require.NoError(t, err)
			got, ok := o.DuplicateKey()
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestObjectZeroValue(t *testing.T) {
	t.Parallel()
	var o jsonbody.Object
	assert.Equal(t, 0, o.Len())
	assert.Equal(t, `{}`, string(o.Bytes()))
	o.Set("stream", []byte("false"))
	o.Set("max_tokens", []byte("16"))
	assert.Equal(t, `{"stream":false,"max_tokens":16}`, string(o.Bytes()))
	assert.Equal(t, []string{"stream", "max_tokens"}, o.Keys())
}

func TestObjectAppendToExtends(t *testing.T) {
	t.Parallel()
	o, err := jsonbody.ParseObject([]byte(`{"a":1}`))
	require.NoError(t, err)
	assert.Equal(t, `data: {"a":1}`, string(o.AppendTo([]byte("data: "))))
}

func TestObjectHugeString(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("QUJD", 4<<20) // 16 MB of base64
	in := `{"model":"m","image":"data:image/png;base64,` + big + `","max_tokens":1}`
	o, err := jsonbody.ParseObject([]byte(in))
	require.NoError(t, err)
	v, ok := o.Get("image")
	require.True(t, ok)
	assert.Len(t, v, len(big)+len(`"data:image/png;base64,"`))
	o.Set("max_tokens", []byte("2"))
	assert.Equal(t, strings.Replace(in, `"max_tokens":1`, `"max_tokens":2`, 1), string(o.Bytes()))
}
