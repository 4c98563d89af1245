package upstream_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/steps/upstream"
)

func TestForwardedHeadersDropWhatConnectionNamesAndInternalHeaders(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"Connection":          {"keep-alive, X-Hop-One", " x-hop-two ,"},
		"X-Hop-One":           {"1"},
		"X-Hop-Two":           {"2"},
		"X-Coordinator-Phase": {"prefill"},
		"X-Coordinator":       {"no dash after: not reserved"},
		"Proxy-Connection":    {"keep-alive"},
		"Proxy-Authorization": {"Basic x"},
		"Expect":              {"100-continue"},
		"X-Custom":            {"v"},
	}
	assert.Equal(t, http.Header{"x-custom": {"v"}, "x-coordinator": {"no dash after: not reserved"}}, upstream.ForwardedHeaders(in))
	for name, want := range map[string]bool{"X-Coordinator-Anything": false, "x-coordinator-": false, "Trailer": false, "X-Coordinatorx": true, "X-Hop-One": true} {
		assert.Equal(t, want, upstream.Forwardable(name), name)
	}
}

func TestDropHopByHop(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Connection": {"X-Named"}, "X-Named": {"n"}, "Keep-Alive": {"5"}, "Te": {"trailers"}, "Trailer": {"X-T"},
		"Transfer-Encoding": {"chunked"}, "Upgrade": {"websocket"}, "Proxy-Authenticate": {"Basic"},
		"Proxy-Authorization": {"Basic x"}, "Proxy-Connection": {"close"}, "X-Kept": {"k"},
	}
	upstream.DropHopByHop(h)
	assert.Equal(t, http.Header{"X-Kept": {"k"}}, h)
}
