package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsTransportPicksThePool(t *testing.T) {
	for _, tt := range []struct {
		address, transport string
		want               pool
	}{
		{address: "http://gw", transport: "", want: &HTTP1Transport{}},
		{address: "http://gw", transport: TransportH1, want: &HTTP1Transport{}},
		{address: "http://gw", transport: TransportNetHTTP, want: &http.Transport{}},
		{address: "https://gw", transport: TransportH1, want: &http.Transport{}},
	} {
		c, err := New(Options{Address: tt.address, Transport: tt.transport})
		require.NoError(t, err)
		c.Close()
		if tt.transport == "" && defaultTransport != TransportH1 {
			continue // the suite's run on net/http's (main_test.go)
		}
		assert.IsType(t, tt.want, c.pool, "%s %q", tt.address, tt.transport)
	}
	_, err := New(Options{Address: "http://gw", Transport: "h2"})
	assert.EqualError(t, err, `upstream: transport must be "h1" or "net/http", got "h2"`)
}
