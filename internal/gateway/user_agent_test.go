package gateway_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
)

// TestLegsCarryTheClientsUserAgent: every leg (Post and Forward, over h1
// and over net/http's https transport) carries the client's User-Agent
// once, else the configured one, never Go's.
func TestLegsCarryTheClientsUserAgent(t *testing.T) {
	t.Parallel()
	ca := tlsfilestest.NewCA(t, "ca")
	seen := make(chan []string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Values("User-Agent")
		_, _ = io.WriteString(w, "{}")
	})
	plain := httptest.NewServer(handler)
	t.Cleanup(plain.Close)
	secure := httptest.NewUnstartedServer(handler)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "gateway").TLS(t)}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	tlsConfig := &tls.Config{RootCAs: ca.Pool()}

	for _, tc := range []struct {
		name, address string
		tls           func() *tls.Config
	}{{"h1", plain.URL, nil}, {"https", secure.URL, func() *tls.Config { return tlsConfig }}} {
		for _, configured := range []string{"", "gateway-test/2"} {
			c, err := gateway.New(gateway.Options{Address: tc.address, TLS: tc.tls, UserAgent: configured})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			want := configured
			if want == "" {
				want = gateway.DefaultUserAgent
			}
			for _, client := range []string{"", "my-app/1.0"} {
				fwd := headers.NewForwarded()
				if client != "" {
					fwd.Set("User-Agent", client)
					want = client
				}
				resp, err := c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions", RequestID: "r", Header: fwd, Body: []byte(`{}`)})
				require.NoError(t, err, tc.name)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, []string{want}, <-seen, "%s post, configured %q, client %q", tc.name, configured, client)

				resp, err = c.Forward(context.Background(), gateway.ForwardRequest{Method: http.MethodGet, Target: "/v1/models", RequestID: "r", Header: fwd})
				require.NoError(t, err, tc.name)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, []string{want}, <-seen, "%s forward, configured %q, client %q", tc.name, configured, client)
			}
		}
	}
}
