package jsonbody_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// TestFlag pins pydantic v2's lax bool (vLLM's request models): what it
// takes as true and false, and what it refuses.
func TestFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw       string
		value, ok bool
	}{
		{`true`, true, true}, {`false`, false, true}, {`null`, false, true},
		{`1`, true, true}, {`0`, false, true}, {`1.0`, true, true}, {`0.0`, false, true},
		{`1e0`, true, true}, {`-0`, false, true}, {`10e-1`, true, true},
		{`"true"`, true, true}, {`"True"`, true, true}, {`"TRUE"`, true, true}, {`"tRuE"`, true, true},
		{`"yes"`, true, true}, {`"YES"`, true, true}, {`"y"`, true, true}, {`"on"`, true, true},
		{`"t"`, true, true}, {`"1"`, true, true}, {`"\u0074rue"`, true, true}, {`"O\u004e"`, true, true},
		{`"false"`, false, true}, {`"False"`, false, true}, {`"no"`, false, true}, {`"n"`, false, true},
		{`"off"`, false, true}, {`"OFF"`, false, true}, {`"f"`, false, true}, {`"0"`, false, true},
		// refused by pydantic
		{`2`, false, false}, {`-1`, false, false}, {`0.5`, false, false}, {`1e400`, false, false},
		{`""`, false, false}, {`" true"`, false, false}, {`"true "`, false, false}, {`"truee"`, false, false},
		{`"+1"`, false, false}, {`"01"`, false, false}, {`"1.0"`, false, false}, {`"ye"`, false, false},
		{`"enabled"`, false, false}, {`"nil"`, false, false}, {`"none"`, false, false},
		{`"ｔrue"`, false, false}, // fullwidth: ASCII case folding only
		{`"\u0074\u0072\u0075\u0065\u0021"`, false, false},
		{`"yes` + "\u017f" + `"`, false, false},
		{`[]`, false, false}, {`{}`, false, false}, {`[true]`, false, false},
		{``, false, false}, {` true`, false, false}, {`tru`, false, false}, {`nul`, false, false},
		{`"true`, false, false}, {`"` + string(make([]byte, 40)) + `"`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			value, ok := jsonbody.Flag([]byte(tt.raw))
			assert.Equal(t, tt.ok, ok, "ok")
			assert.Equal(t, tt.value, value, "value")
		})
	}
}

func TestFlagDoesNotAllocate(t *testing.T) {
	raws := [][]byte{[]byte(`"Yes"`), []byte(`1.0`), []byte(`true`), []byte(`"\u0074rue"`)}
	allocs := testing.AllocsPerRun(100, func() {
		for _, raw := range raws {
			jsonbody.Flag(raw)
		}
	})
	assert.Zero(t, allocs)
}
