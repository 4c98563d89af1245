package jsonbody_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestString(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("iVBORw0KGgo+/=", 100000)
	tests := []struct {
		name string
		raw  string
		want string
		ok   bool
	}{
		{"plain", `"hello"`, "hello", true},
		{"empty", `""`, "", true},
		{"short escapes", `"a\"b\\c\/d\be\ff\ng\rh\ti"`, "a\"b\\c/d\be\ff\ng\rh\ti", true},
		{"unicode escape", `"caf\u00e9 \u4E16"`, "café 世", true},
		{"surrogate pair", `"\ud83d\ude00"`, "😀", true},
		{"lone high surrogate", `"\ud83dx"`, "\uFFFDx", true},
		{"lone low surrogate", `"\ude00"`, "\uFFFD", true},
		{"high then non-surrogate escape", `"\ud83d\u0041"`, "\uFFFDA", true},
		{"reversed pair", `"\ude00\ud83d"`, "\uFFFD\uFFFD", true},
		{"escaped nul", `"\u0000"`, "\x00", true},
		{"raw utf-8", `"日本語"`, "日本語", true},
		{"invalid utf-8 is not a string", "\"a\xff\xfeb\"", "", false},
		{"invalid utf-8 next to escape", "\"\xff\\n\"", "", false},
		{"long base64", `"` + long + `"`, long, true},
		{"long with escaped slashes", `"` + strings.ReplaceAll(long, "/", `\/`) + `"`, long, true},
		{"number", `1`, "", false},
		{"null", `null`, "", false},
		{"empty input", ``, "", false},
		{"unterminated", `"abc`, "", false},
		{"surrounding space", ` "a"`, "", false},
		{"trailing space", `"a" `, "", false},
		{"two strings", `"a""b"`, "", false},
		{"control character", "\"a\nb\"", "", false},
		{"bad escape", `"\q"`, "", false},
		{"bad unicode escape", `"\u12x4"`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := jsonbody.String([]byte(tt.raw))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestBoolAndNull(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw            string
		value, ok, nul bool
	}{
		{`true`, true, true, false},
		{`false`, false, true, false},
		{`null`, false, false, true},
		{`"true"`, false, false, false},
		{`1`, false, false, false},
		{` true`, false, false, false},
		{`True`, false, false, false},
		{``, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			v, ok := jsonbody.Bool([]byte(tt.raw))
			assert.Equal(t, tt.value, v)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.nul, jsonbody.IsNull([]byte(tt.raw)))
		})
	}
}

func TestInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  string
		want int64
		ok   bool
	}{
		{`0`, 0, true},
		{`-0`, 0, true},
		{`3`, 3, true},
		{`-42`, -42, true},
		{`3.0`, 3, true},
		{`3e0`, 3, true},
		{`3E+0`, 3, true},
		{`0.3e1`, 3, true},
		{`300e-2`, 3, true},
		{`8192.0`, 8192, true},
		{`1e3`, 1000, true},
		{`1.5e1`, 15, true},
		{`100.00`, 100, true},
		{`-0.0e-5`, 0, true},
		{`0e999999999999999999999`, 0, true},
		{`9223372036854775807`, math.MaxInt64, true},
		{`-9223372036854775808`, math.MinInt64, true},
		{`922337203685477580.7e1`, math.MaxInt64, true},
		{`-9.223372036854775808e18`, math.MinInt64, true},
		{`999999999999999999`, 999999999999999999, true},
		{`1000000000000000000`, 1000000000000000000, true},
		{`0.00000000000000000000000000000000001e35`, 1, true},
		{`3.5`, 0, false},
		{`0.1`, 0, false},
		{`1e-1`, 0, false},
		{`10e-2`, 0, false},
		{`9223372036854775808`, 0, false},
		{`-9223372036854775809`, 0, false},
		{`1e19`, 0, false},
		{`99999999999999999999`, 0, false},
		{`1e999999999999999999999`, 0, false},
		{`1e-999999999999999999999`, 0, false},
		{`"3"`, 0, false},
		{`true`, 0, false},
		{``, 0, false},
		{` 3`, 0, false},
		{`3 `, 0, false},
		{`03`, 0, false},
		{`3.`, 0, false},
		{`+3`, 0, false},
		{`-`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, ok := jsonbody.Int([]byte(tt.raw))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUint32s(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want []uint32
		err  string // error text; empty for success
	}{
		{name: "empty", raw: `[]`, want: []uint32{}},
		{name: "empty with space", raw: ` [ ] `, want: []uint32{}},
		{name: "one", raw: `[7]`, want: []uint32{7}},
		{name: "zero", raw: `[0,0]`, want: []uint32{0, 0}},
		{name: "bounds", raw: `[0,4294967295]`, want: []uint32{0, math.MaxUint32}},
		{name: "whitespace", raw: "\n[ 1 ,\t2,3\r\n]\n", want: []uint32{1, 2, 3}},
		{name: "integral spellings", raw: `[3.0,3e0,0.3e1,-0,1E2]`, want: []uint32{3, 3, 3, 0, 100}},
		{name: "too big", raw: `[1,2,3,4294967296]`, err: "index 3: not a non-negative 32-bit integer"},
		{name: "eleven digits", raw: `[10000000000]`, err: "index 0: not a non-negative 32-bit integer"},
		{name: "negative", raw: `[1,-1]`, err: "index 1: not a non-negative 32-bit integer"},
		{name: "fraction", raw: `[1.5]`, err: "index 0: not a non-negative 32-bit integer"},
		{name: "string", raw: `[1,"2"]`, err: "index 1: not a non-negative 32-bit integer"},
		{name: "null", raw: `[null]`, err: "index 0: not a non-negative 32-bit integer"},
		{name: "nested", raw: `[[1]]`, err: "index 0: not a non-negative 32-bit integer"},
		{name: "not an array", raw: `{"a":1}`, err: "json value is not an array"},
		{name: "number", raw: `1`, err: "json value is not an array"},
		{name: "leading zero", raw: `[01]`, err: "invalid character '1' after array element at offset 2 (in [0])"},
		{name: "trailing comma", raw: `[1,]`, err: "invalid character ']' looking for beginning of value at offset 3 (in [1])"},
		{name: "unclosed", raw: `[1,2`, err: "unexpected end of JSON input at offset 4 (in [1])"},
		{name: "trailing garbage", raw: `[1] 2`, err: "invalid character '2' after top-level value at offset 4"},
		{name: "trailing garbage after empty", raw: `[],`, err: "invalid character ',' after top-level value at offset 2"},
		{name: "empty input", raw: ``, err: "unexpected end of JSON input at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := jsonbody.Uint32s([]byte(tt.raw))
			if tt.err != "" {
				assert.EqualError(t, err, tt.err)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
