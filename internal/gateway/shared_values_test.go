package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProfileValue(t *testing.T) {
	for _, p := range []string{ProfileEncode, ProfilePrefill, ProfileDecode, "custom"} {
		assert.Equal(t, []string{p}, profileValue(p))
	}
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = profileValue(ProfileDecode) }), "the three profiles' values are shared")
}

// TestSharedHeaderValuesStayPut: a leg's header that takes more values
// for Content-Type or EPP-Profile leaves the shared values as they were.
func TestSharedHeaderValuesStayPut(t *testing.T) {
	t.Parallel()
	h := http.Header{"Content-Type": jsonContentType, "Epp-Profile": profileValue(ProfileDecode)}
	h.Add("Content-Type", "text/plain")
	h.Add("Epp-Profile", "prefill")
	h.Set("Epp-Profile", "encode")
	assert.Equal(t, []string{"application/json"}, jsonContentType)
	assert.Equal(t, []string{ProfileDecode}, profileValue(ProfileDecode))
	assert.Equal(t, []string{"application/json", "text/plain"}, h["Content-Type"])
}
