package requestid_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/requestid"
)

func TestRequestID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "req-abc-123", strings.Repeat("A", 128), "0-9"} {
		assert.True(t, requestid.Valid(ok), ok)
		assert.Equal(t, ok, requestid.OrNew(ok))
	}
	for _, bad := range []string{"", strings.Repeat("a", 129), "a b", "evil\r\nInjected: x", "x_y", "é"} {
		assert.False(t, requestid.Valid(bad), bad)
		got := requestid.OrNew(bad)
		assert.True(t, requestid.Valid(got))
		assert.Len(t, got, 36)
	}
}
