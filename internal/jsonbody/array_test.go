package jsonbody_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestParseArray(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", `[]`, []string{}},
		{"empty with space", " [ \n ] ", []string{}},
		{"scalars", `[1,"a",true,null,-2.5e1]`, []string{`1`, `"a"`, `true`, `null`, `-2.5e1`}},
		{"whitespace trimmed", "[ 1 ,\n\"a\" ]", []string{`1`, `"a"`}},
		{"nested kept whole", `[[1, 2],{"a":[]}, {}]`, []string{`[1, 2]`, `{"a":[]}`, `{}`}},
		{"strings with brackets", `["]", "[,"]`, []string{`"]"`, `"[,"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			elems, err := jsonbody.ParseArray([]byte(tt.in))
			require.NoError(t, err)
			require.NotNil(t, elems)
			got := make([]string, len(elems))
			for i, e := range elems {
				got[i] = string(e)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseArrayErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		notArray bool
		tooDeep  bool
		syntax   string
	}{
		{name: "object", in: `{}`, notArray: true},
		{name: "null", in: `null`, notArray: true},
		{name: "string", in: `"[]"`, notArray: true},
		{name: "empty", in: ``, syntax: "unexpected end of JSON input at offset 0"},
		{name: "invalid object", in: `{"a"`, syntax: "unexpected end of JSON input at offset 4 (in a)"},
		{name: "trailing comma", in: `[1,]`, syntax: "invalid character ']' looking for beginning of value at offset 3 (in [1])"},
		{name: "trailing garbage", in: `[1]]`, syntax: "invalid character ']' after top-level value at offset 3"},
		{name: "trailing garbage after empty", in: `[] x`, syntax: "invalid character 'x' after top-level value at offset 3"},
		{name: "missing comma", in: `[1 2]`, syntax: "invalid character '2' after array element at offset 3 (in [0])"},
		{name: "unclosed", in: `[1`, syntax: "unexpected end of JSON input at offset 2 (in [0])"},
		{name: "too deep", in: strings.Repeat("[", jsonbody.MaxDepth+1), tooDeep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			elems, err := jsonbody.ParseArray([]byte(tt.in))
			assert.Nil(t, elems)
			switch {
			case tt.notArray:
				assert.ErrorIs(t, err, jsonbody.ErrNotArray)
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

func TestEachElement(t *testing.T) {
	t.Parallel()
	var got []string
	err := jsonbody.EachElement([]byte(` [1, "a", {"b":[2]} ,null] `), func(i int, e []byte) error {
		assert.Equal(t, len(got), i, "indexes in order")
		got = append(got, string(e))
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{`1`, `"a"`, `{"b":[2]}`, `null`}, got)

	stop := errors.New("stop")
	calls := 0
	err = jsonbody.EachElement([]byte(`[1,2,3]`), func(i int, _ []byte) error {
		calls++
		if i == 1 {
			return stop
		}
		return nil
	})
	assert.Same(t, stop, err, "fn's error comes back as it came")
	assert.Equal(t, 2, calls, "no element after fn's error")

	err = jsonbody.EachElement([]byte(`[1,2`), func(int, []byte) error { return nil })
	var se *jsonbody.SyntaxError
	assert.ErrorAs(t, err, &se, "malformed arrays are syntax errors")
	assert.ErrorIs(t, jsonbody.EachElement([]byte(`{}`), func(int, []byte) error { return nil }), jsonbody.ErrNotArray)
}

// BenchmarkEachElementHugeArray shows a walk keeps nothing: compare its
// B/op with ParseArray's on the same million-element array.
func BenchmarkEachElementHugeArray(b *testing.B) {
	data := []byte("[" + strings.Repeat("7,", 1<<20) + "7]")
	b.Run("EachElement", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = jsonbody.EachElement(data, func(int, []byte) error { return nil })
		}
	})
	b.Run("ParseArray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = jsonbody.ParseArray(data)
		}
	})
}
