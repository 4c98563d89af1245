package headers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestForwardedNormalisesNames(t *testing.T) {
	t.Parallel()
	var f headers.Forwarded // the zero value is ready to use
	assert.Equal(t, "", f.Get("X-A"))
	f.Set("X-Mode", "wait")
	assert.Equal(t, "wait", f.Get("x-mode"))
	assert.Equal(t, "wait", f.Get("X-MODE"))
	assert.True(t, f.Has("x-MODE"))
	f.Set("x-mode", "enqueue")
	assert.Equal(t, 1, f.Len(), "one name whatever its case")
	assert.Equal(t, "enqueue", f.Get("X-Mode"))
	f.Del("X-MODE")
	assert.False(t, f.Has("x-mode"))
	assert.Equal(t, 0, f.Len())
}

func TestForwardedCloneIsIndependent(t *testing.T) {
	t.Parallel()
	f := headers.NewForwarded("A", "1", "b", "2")
	c := f.Clone()
	c.Set("a", "changed")
	c.Del("b")
	assert.Equal(t, "1", f.Get("a"))
	assert.Equal(t, "2", f.Get("B"))
	assert.Equal(t, []string{"a"}, c.Names())
}

func TestForwardedWriteToKeepsLowercaseNames(t *testing.T) {
	t.Parallel()
	h := http.Header{"Content-Type": {"application/json"}}
	headers.NewForwarded("Authorization", "Bearer t", "X-Custom", "v").WriteTo(h)
	assert.Equal(t, http.Header{"Content-Type": {"application/json"}, "authorization": {"Bearer t"}, "x-custom": {"v"}}, h)
}

func TestNewForwardedPanicsOnOddPairs(t *testing.T) {
	t.Parallel()
	odd := []string{"a"}
	assert.Panics(t, func() { headers.NewForwarded(odd...) })
}
