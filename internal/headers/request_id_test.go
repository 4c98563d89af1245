package headers_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestRequestID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "req-abc-123", strings.Repeat("A", 128), "0-9"} {
		assert.True(t, headers.ValidRequestID(ok), ok)
		assert.Equal(t, ok, headers.RequestIDOrNew(ok))
	}
	for _, bad := range []string{"", strings.Repeat("a", 129), "a b", "evil\r\nInjected: x", "x_y", "é"} {
		assert.False(t, headers.ValidRequestID(bad), bad)
		got := headers.RequestIDOrNew(bad)
		assert.True(t, headers.ValidRequestID(got))
		assert.Len(t, got, 36)
	}
}
