package headers_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestSessionTokensJoinAndSplit(t *testing.T) {
	t.Parallel()
	in := headers.PhaseTokens{Prefill: "cHJlZmlsbC0x", Decode: "ZGVjb2RlLTI="}
	got, joined := headers.SplitSessionToken(headers.JoinSessionTokens(in))
	assert.True(t, joined)
	assert.Equal(t, in, got, "each phase gets its own back")

	got, joined = headers.SplitSessionToken("ZGVjb2RlLTI=")
	assert.False(t, joined, "the EPP's own token is for every phase alike")
	assert.Equal(t, headers.PhaseTokens{}, got)

	for _, bad := range []string{"pd1.", "pd1.!!", "pd1.a.b.c", "pd1." + "AA.AQ"} {
		got, joined = headers.SplitSessionToken(bad)
		assert.True(t, joined, bad)
		assert.Equal(t, headers.PhaseTokens{}, got, "%q steers no leg", bad)
	}
	got, _ = headers.SplitSessionToken(headers.JoinSessionTokens(headers.PhaseTokens{Decode: "d"}))
	assert.Equal(t, headers.PhaseTokens{Decode: "d"}, got, "a phase without a token")
}
