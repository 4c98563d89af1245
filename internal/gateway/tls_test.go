package gateway_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
)

// tlsServer is an https test server with a certificate of ca that records
// each request's protocol and client certificate.
type tlsServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "<proto> <client certificate CN or ->"
}

func startTLSServer(t *testing.T, ca *tlsfilestest.CA, http2 bool, clientAuth tls.ClientAuthType) *tlsServer {
	t.Helper()
	s := &tlsServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := "-"
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Proto+" "+peer)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	s.EnableHTTP2 = http2
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "gateway").TLS(t)}, ClientAuth: clientAuth, ClientCAs: ca.Pool()}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func post(c *gateway.Client) error {
	resp, err := c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions", RequestID: "r", Body: []byte(`{}`)})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func TestPostOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "coordinator").Write(t, dir, "client")

	tests := []struct {
		name       string
		http2      bool
		clientAuth tls.ClientAuthType
		files      tlsfiles.ClientConfig
		want       string // what the server saw; "" when the leg fails
	}{
		{name: "h2 by ALPN", http2: true, files: tlsfiles.ClientConfig{CAFile: caFile}, want: "HTTP/2.0 -"},
		{name: "HTTP/1.1 server", files: tlsfiles.ClientConfig{CAFile: caFile}, want: "HTTP/1.1 -"},
		{name: "client certificate", http2: true, clientAuth: tls.RequireAndVerifyClientCert,
			files: tlsfiles.ClientConfig{CAFile: caFile, CertFile: cert, KeyFile: key}, want: "HTTP/2.0 coordinator"},
		{name: "no client certificate", http2: true, clientAuth: tls.RequireAndVerifyClientCert, files: tlsfiles.ClientConfig{CAFile: caFile}},
		{name: "untrusted server", http2: true, files: tlsfiles.ClientConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startTLSServer(t, ca, tt.http2, tt.clientAuth)
			files, err := tlsfiles.NewClient(tt.files, tlsfiles.Options{Name: "gateway.tls"})
			require.NoError(t, err)
			c, err := gateway.New(gateway.Options{Address: srv.URL, TLS: files.TLSConfig})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			err = post(c)
			if tt.want == "" {
				var te *gateway.TransportError
				assert.ErrorAs(t, err, &te)
				assert.Empty(t, srv.requests())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{tt.want}, srv.requests())
		})
	}
}

// TestPostOverTLSDefaults: without Options.TLS an https address is
// verified against the system's CAs.
func TestPostOverTLSDefaults(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	c, err := gateway.New(gateway.Options{Address: srv.URL})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	err = post(c)
	assert.ErrorContains(t, err, "certificate signed by unknown authority", "the system roots do not hold httptest's CA")
}

// TestPostOverTLSReloads: a client certificate replaced on disk is sent on
// the next connection.
func TestPostOverTLSReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "first").Write(t, dir, "client")
	srv := startTLSServer(t, ca, true, tls.RequireAndVerifyClientCert)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	files, err := tlsfiles.NewClient(tlsfiles.ClientConfig{CAFile: caFile, CertFile: cert, KeyFile: key}, tlsfiles.Options{Now: clock})
	require.NoError(t, err)
	c, err := gateway.New(gateway.Options{Address: srv.URL, TLS: files.TLSConfig})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	require.NoError(t, post(c))
	ca.Issue(t, "second").Write(t, dir, "client")
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	require.NoError(t, post(c))
	c.Close() // the next leg dials again
	require.NoError(t, post(c))
	assert.Equal(t, []string{"HTTP/2.0 first", "HTTP/2.0 first", "HTTP/2.0 second"}, srv.requests(),
		"an open connection keeps its certificate; the next one sends the new")
}
