package headers_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// wire is compat D25's alphabet and length of an id on the legs.
var wire = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)

func TestForLegs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "req-abc-123", "x-", strings.Repeat("A", 110), strings.Repeat("B", 111),
		strings.Repeat("C", 112), strings.Repeat("D", 128)} {
		first, second := headers.LegRequestID(id), headers.LegRequestID(id)
		assert.NotEqual(t, first, second, "two requests with one id never share a leg id")
		for _, got := range []string{first, second} {
			assert.Regexp(t, wire, got)
			assert.True(t, headers.ValidRequestID(got), got)
			prefix := id[:min(len(id), 111)]
			assert.True(t, strings.HasPrefix(got, prefix+"-"), "%q starts with the client's id, cut to leave room", got)
			assert.Len(t, got, len(prefix)+17)
			assert.True(t, headers.IsLegRequestID(got, id), got)
		}
	}
}

func TestLegsOf(t *testing.T) {
	t.Parallel()
	leg := headers.LegRequestID("hostile-1")
	assert.True(t, headers.IsLegRequestID("hostile-1", "hostile-1"), "the id itself (verbatim switch, minted ids)")
	assert.True(t, headers.IsLegRequestID(leg, "hostile-1"))
	assert.False(t, headers.IsLegRequestID(leg, "hostile-10"))
	assert.False(t, headers.IsLegRequestID(leg, "hostile"))
	assert.False(t, headers.IsLegRequestID("hostile-1-rest", "hostile-1"), "another client id is not a leg id")
	assert.False(t, headers.IsLegRequestID(headers.LegRequestID("hostile-1-rest"), "hostile-1"))
	assert.False(t, headers.IsLegRequestID("hostile-1-ABCDEF0123456789", "hostile-1"), "the suffix is lowercase hex")
}

func TestMinted(t *testing.T) {
	t.Parallel()
	assert.False(t, headers.MintedRequestID(context.Background()))
	assert.True(t, headers.MintedRequestID(headers.WithMintedRequestID(context.Background())))
}
