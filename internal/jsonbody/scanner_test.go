package jsonbody_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// scanAny reads the value that comes next into what encoding/json with
// UseNumber makes of it, with every Scanner method a value needs: a copy
// of the scanner finds the value's kind.
func scanAny(s *jsonbody.Scanner) (any, bool) {
	peek := *s
	raw, ok := peek.Raw()
	if !ok {
		return nil, false
	}
	switch raw[0] {
	case '{':
		obj := map[string]any{}
		return obj, s.Object(func(name []byte) bool {
			v, ok := scanAny(s)
			obj[string(name)] = v // the last of duplicates wins, as in encoding/json
			return ok
		})
	case '[':
		arr := []any{}
		return arr, s.Array(func() bool {
			v, ok := scanAny(s)
			arr = append(arr, v)
			return ok
		})
	case '"':
		text, ok := s.Quoted()
		if !ok {
			return nil, false
		}
		return jsonbody.String(text)
	case 'n':
		return nil, s.Null()
	case 't', 'f':
		return raw[0] == 't', s.Skip()
	}
	text, ok := s.Number()
	return json.Number(text), ok
}

// scanDocument reads data as one document with scanAny.
func scanDocument(data []byte) (any, bool) {
	s := jsonbody.NewScanner(data)
	v, ok := scanAny(&s)
	return v, ok && s.End()
}

func TestScannerReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"answer", `{"choices":[{"index":0,"token_ids":[1,2],"finish_reason":null}],"usage":{"prompt_tokens":3}}`},
		{"whitespace everywhere", " \t\r\n{ \"a\" : [ 1 , { } , [ ] , \"x\" ] , \"b\" : null }\n"},
		{"escaped name", `{"\u0063hoices":1,"a\"b":2,"\ud83d\ude00":3}`},
		{"escaped and plain names alike", `{"a\u0062":1,"ab":2}`},
		{"duplicates", `{"a":1,"a":{"b":2}}`},
		{"long plain name", `{"` + strings.Repeat("k", 40) + `":"` + strings.Repeat("v", 40) + `"}`},
		{"non-ASCII strings", `{"é":"日本","x":"ü\n"}`},
		{"numbers", `[0,-0,1.5e3,-2E-2,123456789012345678901234567890]`},
		{"literals", `[true,false,null]`},
		{"top-level scalar", `"x"`},
		{"max depth", strings.Repeat("[", jsonbody.MaxDepth) + strings.Repeat("]", jsonbody.MaxDepth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := scanDocument([]byte(tt.in))
			require.True(t, ok)
			var want any
			require.NoError(t, unmarshalNumbers([]byte(tt.in), &want))
			assert.Equal(t, want, got)
		})
	}
}

func TestScannerRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ``},
		{"truncated object", `{"a":1`},
		{"trailing comma", `{"a":1,}`},
		{"missing colon", `{"a" 1}`},
		{"unquoted name", `{a:1}`},
		{"trailing garbage", `{"a":1} x`},
		{"leading zero", `[01]`},
		{"bad fraction", `[1.]`},
		{"bad exponent", `[1e]`},
		{"control character in a string", "[\"a\x01\"]"},
		{"bad escape", `["\x"]`},
		{"invalid UTF-8 in a name", "{\"\xff\":1}"},
		{"invalid UTF-8 in a value", "[\"\xfe\"]"},
		{"bad literal", `[nul]`},
		{"too deep", strings.Repeat("[", jsonbody.MaxDepth+1) + strings.Repeat("]", jsonbody.MaxDepth+1)},
		{"too deep inside a skipped value", `{"a":` + strings.Repeat("[", jsonbody.MaxDepth) + strings.Repeat("]", jsonbody.MaxDepth) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ok := scanDocument([]byte(tt.in))
			assert.False(t, ok)
		})
	}
}

// TestScannerSkipDepth: a value skipped inside objects counts their depth
// towards MaxDepth, as Valid does.
func TestScannerSkipDepth(t *testing.T) {
	t.Parallel()
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	for _, n := range []int{jsonbody.MaxDepth - 1, jsonbody.MaxDepth} {
		s := jsonbody.NewScanner(deep(n))
		ok := s.Object(func([]byte) bool { return s.Skip() }) && s.End()
		valid := jsonbody.Valid(deep(n))
		assert.Equal(t, valid == nil, ok, "nesting %d", n+1)
		assert.Equal(t, n < jsonbody.MaxDepth, ok, "nesting %d", n+1)
	}
}

func TestScannerNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		u        uint32
		uOK      bool
		f        float32
		fOK      bool
		isNumber bool
	}{
		{in: `0`, u: 0, uOK: true, f: 0, fOK: true, isNumber: true},
		{in: `4294967295`, u: 4294967295, uOK: true, f: 4294967296, fOK: true, isNumber: true},
		{in: `4294967296`, f: 4294967296, fOK: true, isNumber: true},
		{in: `-1`, f: -1, fOK: true, isNumber: true},
		{in: `1.0`, f: 1, fOK: true, isNumber: true},
		{in: `1e0`, f: 1, fOK: true, isNumber: true},
		{in: `-0.123`, f: -0.123, fOK: true, isNumber: true},
		{in: `1e39`, isNumber: true},
		{in: `"1"`},
		{in: `null`},
	}
	for _, tt := range tests {
		s := jsonbody.NewScanner([]byte(tt.in))
		u, ok := s.Uint32()
		assert.Equal(t, tt.uOK, ok && s.End(), "Uint32(%s)", tt.in)
		assert.Equal(t, tt.u, u, "Uint32(%s)", tt.in)
		if _, err := strconv.ParseUint(tt.in, 10, 32); tt.isNumber {
			assert.Equal(t, err == nil, tt.uOK, "encoding/json's Uint32(%s)", tt.in)
		}

		s = jsonbody.NewScanner([]byte(tt.in))
		f, ok := s.Float32()
		assert.Equal(t, tt.fOK, ok && s.End(), "Float32(%s)", tt.in)
		if tt.fOK {
			assert.Equal(t, tt.f, f, "Float32(%s)", tt.in)
		}
	}
}

// TestScannerNull: Null reads a null and nothing else, leaving any other
// value to read.
func TestScannerNull(t *testing.T) {
	t.Parallel()
	s := jsonbody.NewScanner([]byte(`[ null , "null" ]`))
	var got []string
	ok := s.Array(func() bool {
		if s.Null() {
			got = append(got, "null")
			return true
		}
		q, ok := s.Quoted()
		got = append(got, string(q))
		return ok
	})
	require.True(t, ok && s.End())
	assert.Equal(t, []string{"null", `"null"`}, got)
}

// TestScannerNameBuffer: an escaped name is unescaped into the Scanner's
// buffer, which the next escaped name reuses; a plain name aliases the
// document.
func TestScannerNameBuffer(t *testing.T) {
	t.Parallel()
	data := []byte(`{"plain":1,"\u0061":2,"\u0062\u0062":3}`)
	s := jsonbody.NewScanner(data)
	var names []string
	var plainAliases bool
	ok := s.Object(func(name []byte) bool {
		names = append(names, string(name))
		if string(name) == "plain" {
			plainAliases = &name[0] == &data[2]
		}
		return s.Skip()
	})
	require.True(t, ok && s.End())
	assert.Equal(t, []string{"plain", "a", "bb"}, names)
	assert.True(t, plainAliases, "a plain name aliases the document")
}

// TestScannerAllocs: reading a document of plain names allocates nothing.
func TestScannerAllocs(t *testing.T) {
	data := []byte(`{"choices":[{"index":0,"token_ids":[151643,7],"logprobs":{"content":[{"token":"token_id:151643","logprob":-0.123,"bytes":null}]}}],"usage":null}`)
	r := &allocsReader{}
	allocs := testing.AllocsPerRun(100, func() {
		r.s, r.ids = jsonbody.NewScanner(data), r.ids[:0]
		if !r.object() || !r.s.End() {
			t.Fatal("not read")
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, []uint32{151643, 7}, r.ids)
	assert.Equal(t, float32(-0.123), r.lp)
}

// allocsReader reads the token IDs and the logprob of TestScannerAllocs.
type allocsReader struct {
	s   jsonbody.Scanner
	ids []uint32
	lp  float32
}

func (r *allocsReader) object() bool { return r.s.Object(r.member) }

func (r *allocsReader) member(name []byte) bool {
	switch string(name) {
	case "choices", "content":
		return r.s.Array(r.object)
	case "logprobs":
		return r.object()
	case "token_ids":
		return r.s.Array(func() bool {
			v, ok := r.s.Uint32()
			r.ids = append(r.ids, v)
			return ok
		})
	case "logprob":
		var ok bool
		r.lp, ok = r.s.Float32()
		return ok
	}
	return r.s.Skip()
}

// FuzzScanner checks the Scanner against Valid and encoding/json: it reads
// exactly the documents Valid accepts, as encoding/json reads them, and
// Uint32 and Float32 read a number as encoding/json reads one into a
// uint32 and a float32. testdata/fuzz/FuzzScanner holds the shapes of a
// worker's answers to the tokens API (service/tokens reads those with a
// Scanner) and their near misses.
func FuzzScanner(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanDocument(data)
		err := jsonbody.Valid(data)
		require.Equal(t, err == nil, ok, "Valid(%q) = %v", data, err)
		if !ok {
			return
		}
		var want any
		require.NoError(t, unmarshalNumbers(data, &want))
		assert.Equal(t, want, got)
		if n, isNumber := got.(json.Number); isNumber {
			checkNumber(t, string(n))
		}
	})
}

// checkNumber checks Uint32 and Float32 on a valid number against
// encoding/json.
func checkNumber(t *testing.T, text string) {
	s := jsonbody.NewScanner([]byte(text))
	u, ok := s.Uint32()
	var wantU uint32
	wantErr := json.Unmarshal([]byte(text), &wantU)
	require.Equal(t, wantErr == nil, ok, "Uint32(%s): %v", text, wantErr)
	assert.Equal(t, wantU, u)

	s = jsonbody.NewScanner([]byte(text))
	f, ok := s.Float32()
	var wantF float32
	wantErr = json.Unmarshal([]byte(text), &wantF)
	var typeErr *json.UnmarshalTypeError
	require.True(t, wantErr == nil || errors.As(wantErr, &typeErr), "%v", wantErr)
	require.Equal(t, wantErr == nil, ok, "Float32(%s): %v", text, wantErr)
	if ok {
		assert.Equal(t, wantF, f)
	}
}
