package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOutputSuffix(t *testing.T) {
	t.Parallel()
	out := func(k int) []uint32 {
		ids := make([]uint32, k)
		for i := range ids {
			ids[i] = wordAt(i).id
		}
		return ids
	}
	for name, tc := range map[string]struct {
		prompt []uint32
		want   int
	}{
		"no output":             {[]uint32{9000, 9001}, 0},
		"three tokens":          {append([]uint32{9000}, out(3)...), 3},
		"past one sentence":     {append([]uint32{9000}, out(30)...), 30},
		"not the output":        {[]uint32{9000, wordAt(1).id}, 0},
		"the prompt all output": {out(2), 0},
		"output after output":   {append(out(1), out(2)...), 2},
	} {
		assert.Equal(t, tc.want, outputSuffix(tc.prompt), name)
	}
}
