package headers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestDPRankIsStableAndSpread(t *testing.T) {
	t.Parallel()
	assert.Equal(t, headers.DPRank("session-42", 8), headers.DPRank("session-42", 8), "one key, one rank")
	assert.Equal(t, "0", headers.DPRank("anything", 1))
	seen := map[string]int{}
	for i := range 800 {
		r := headers.DPRank("session-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 8)
		seen[r]++
	}
	assert.Len(t, seen, 8, "every rank is used")
	for r, n := range seen {
		assert.Greater(t, n, 50, "rank %s: %d of 800 keys", r, n)
	}
	assert.False(t, headers.Forwardable(headers.DataParallelRank), "the coordinator owns it (D24)")
	assert.True(t, headers.Forwardable(headers.SessionID), "a client's session id reaches the legs")
}
