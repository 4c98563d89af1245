package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// fuzzSeeds are added to every fuzz target; testdata/fuzz holds more.
var fuzzSeeds = []string{
	``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0.5e+10`, `"x"`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true}`,
	`{"a":1,"a":{"b":[1,2,{"c":null}]},"\u0061":"\ud83d\ude00"}`,
	`{"k\"ey":"va\\lue\n","e":1e3,"f":-0.0,"g":[[],{}]}`,
	" \t\r\n{\"a\" : [ 1 , 2 ] , \"b\" : { } }\n",
	`{"bad":"\x01"}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `01`, `1.`, `1e`, `-`, `tru`, `nul`,
	"\xef\xbb\xbf{}", "{\"\xff\":\"\xfe\"}", `"\ud800"`, `"\ud800\u0041"`, `"\uDC00\uD800"`,
	`[1,2,3,4294967295,4294967296,-1,3.0,3e0,0.3e1]`, `{"a":"x"} x`, `[[[[[[[[]]]]]]]]`,
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
}

func firstByte(data []byte) byte {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return 0
	}
	return trimmed[0]
}

// FuzzValid checks Valid and ParseArray against encoding/json plus UTF-8
// validation, and that a syntax error's path names a prefix of the document.
func FuzzValid(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := jsonbody.Valid(data)
		if errors.Is(err, jsonbody.ErrTooDeep) {
			return // encoding/json allows 10000 levels
		}
		valid := validJSON(data)
		require.Equal(t, valid, err == nil, "Valid(%q) = %v", data, err)
		if err != nil {
			var se *jsonbody.SyntaxError
			require.ErrorAs(t, err, &se)
			assert.True(t, se.Offset >= 0 && se.Offset <= int64(len(data)), "offset %d", se.Offset)
			assert.LessOrEqual(t, len(se.Path), 32*(64+12)+3, "path %q", se.Path)
		}

		elems, err := jsonbody.ParseArray(data)
		isArray := valid && firstByte(data) == '['
		require.Equal(t, isArray, err == nil, "ParseArray(%q) = %v", data, err)
		if !isArray {
			if valid {
				assert.ErrorIs(t, err, jsonbody.ErrNotArray)
			}
			return
		}
		var want []any
		require.NoError(t, unmarshalNumbers(data, &want))
		got := make([]any, len(elems))
		for i, e := range elems {
			require.NoError(t, unmarshalNumbers(e, &got[i]), "element %d %q", i, e)
			assert.Equal(t, bytes.TrimSpace(e), e, "element %d has surrounding space", i)
		}
		assert.Equal(t, want, got)
	})
}

// FuzzParseObject checks ParseObject, Get, Keys, Set, Delete, DuplicateKey
// and Bytes against encoding/json.
func FuzzParseObject(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := jsonbody.ParseObject(data)
		if errors.Is(err, jsonbody.ErrTooDeep) {
			return
		}
		valid := validJSON(data)
		isObject := valid && firstByte(data) == '{'
		require.Equal(t, isObject, err == nil, "ParseObject(%q) = %v", data, err)
		if !isObject {
			if valid {
				assert.ErrorIs(t, err, jsonbody.ErrNotObject)
			} else {
				var se *jsonbody.SyntaxError
				assert.ErrorAs(t, err, &se)
			}
			return
		}
		var want map[string]any
		require.NoError(t, unmarshalNumbers(data, &want))

		assertObject(t, want, o.Bytes())
		keys := o.Keys()
		require.Len(t, keys, o.Len())
		distinct := map[string]bool{}
		dup, hasDup := "", false
		for _, k := range keys {
			if distinct[k] && !hasDup {
				dup, hasDup = k, true
			}
			distinct[k] = true
			raw, ok := o.Get(k)
			require.True(t, ok, "Get(%q)", k)
			var v any
			require.NoError(t, unmarshalNumbers(raw, &v), "Get(%q) = %q", k, raw)
			assert.Equal(t, want[k], v, "Get(%q)", k)
		}
		assert.Len(t, want, len(distinct))
		gotDup, ok := o.DuplicateKey()
		assert.Equal(t, hasDup, ok)
		assert.Equal(t, dup, gotDup)

		// Edit: replace or add one key, delete another.
		o.Set("max_tokens", []byte(`{"x":[7]}`))
		want["max_tokens"] = map[string]any{"x": []any{json.Number("7")}}
		deleted := "max_tokens"
		if len(keys) > 0 && keys[0] != "max_tokens" {
			deleted = keys[0]
			o.Delete(deleted)
			delete(want, deleted)
		}
		assertObject(t, want, o.Bytes())
		wantDup := false
		counts := map[string]int{}
		for _, k := range keys {
			counts[k]++
			wantDup = wantDup || counts[k] == 2 && k != deleted && k != "max_tokens"
		}
		_, ok = o.DuplicateKey()
		assert.Equal(t, wantDup, ok)
	})
}

func assertObject(t *testing.T, want map[string]any, body []byte) {
	t.Helper()
	require.True(t, json.Valid(body), "invalid output %q", body)
	var got map[string]any
	require.NoError(t, unmarshalNumbers(body, &got))
	assert.Equal(t, want, got)
}

// FuzzValues checks the typed readers and writers against encoding/json and
// math/big.
func FuzzValues(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		valid := validJSON(raw) && bytes.Equal(bytes.TrimSpace(raw), raw)
		first := firstByte(raw)

		s, ok := jsonbody.String(raw)
		require.Equal(t, valid && first == '"', ok, "String(%q)", raw)
		if ok {
			var want string
			require.NoError(t, json.Unmarshal(raw, &want))
			assert.Equal(t, want, s)
		}

		n, ok := jsonbody.Int(raw)
		if valid && (first == '-' || first >= '0' && first <= '9') {
			if want, known := exactInt(raw); known {
				require.Equal(t, want != nil, ok, "Int(%q)", raw)
				if ok {
					assert.Equal(t, want.Int64(), n)
				}
			}
		} else {
			assert.False(t, ok, "Int(%q)", raw)
		}

		ids, err := jsonbody.Uint32s(raw)
		if !errors.Is(err, jsonbody.ErrTooDeep) {
			elems, perr := jsonbody.ParseArray(raw)
			if perr != nil {
				assert.Error(t, err)
			} else {
				want := make([]uint32, 0, len(elems))
				for _, e := range elems {
					v, ok := jsonbody.Int(e)
					if !ok || v < 0 || v > math.MaxUint32 {
						want = nil
						break
					}
					want = append(want, uint32(v))
				}
				if want == nil {
					assert.ErrorContains(t, err, "not a non-negative 32-bit integer")
				} else {
					require.NoError(t, err)
					assert.Equal(t, want, ids)
					assert.Equal(t, want, mustUint32s(t, jsonbody.AppendUint32s(nil, ids)))
				}
			}
		}

		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		require.NoError(t, e.Encode(string(raw)))
		assert.Equal(t, string(bytes.TrimSuffix(enc.Bytes(), []byte("\n"))), string(jsonbody.AppendString(nil, string(raw))))
	})
}

// unmarshalNumbers is json.Unmarshal with numbers kept as json.Number, so
// that valid numbers past float64's range (1e700) compare too.
func unmarshalNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

func mustUint32s(t *testing.T, raw []byte) []uint32 {
	t.Helper()
	var ids []uint32
	require.NoError(t, json.Unmarshal(raw, &ids))
	return ids
}

// exactInt returns the integer value of a valid JSON number if it is an
// integer in int64 range, nil if it is not; known is false for exponents too
// large to evaluate cheaply.
func exactInt(raw []byte) (v *big.Int, known bool) {
	if e := bytes.IndexAny(raw, "eE"); e >= 0 {
		exp := bytes.TrimLeft(raw[e+1:], "+-0")
		if len(exp) > 4 {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(string(raw))
	if !ok {
		return nil, false
	}
	if !r.IsInt() || !r.Num().IsInt64() {
		return nil, true
	}
	return r.Num(), true
}
