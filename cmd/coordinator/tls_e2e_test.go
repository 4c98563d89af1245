package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/sim"
)

// testPKI is a private CA with the files a TLS test's config points at.
type testPKI struct {
	dir    string
	ca     *tlsfilestest.CA
	caFile string
	// client is a certificate of the CA for the coordinator's clients.
	client tls.Certificate
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "test-ca")
	return &testPKI{dir: dir, ca: ca, caFile: ca.WriteCA(t, dir, "ca.crt"), client: ca.Issue(t, "client").TLS(t)}
}

// issue writes a certificate named cn as dir/name.{crt,key}.
func (p *testPKI) issue(t *testing.T, name, cn string) (certFile, keyFile string) {
	t.Helper()
	return p.ca.Issue(t, cn).Write(t, p.dir, name)
}

// tlsStack is a coordinator whose listeners serve TLS.
type tlsStack struct {
	rest, grpc string // host:port
}

// startTLSStack starts the app as startStackEnv does, with env (the TLS
// keys are scalars: set through COORDINATOR_* here).
func startTLSStack(t *testing.T, env map[string]string, gatewayURL, renderURL, extraYAML string) *tlsStack {
	t.Helper()
	var addrs *service.Addresses
	startStackEnv(t, env, gatewayURL, renderURL, extraYAML, fx.Populate(&addrs))
	return &tlsStack{rest: addrs.REST(), grpc: addrs.GRPC()}
}

// serverEnv sets server.tls to cert and key, client_auth to auth (with the
// CA as client_ca_file unless auth is none).
func (p *testPKI) serverEnv(cert, key, auth string) map[string]string {
	env := map[string]string{"COORDINATOR_SERVER_TLS_CERT_FILE": cert, "COORDINATOR_SERVER_TLS_KEY_FILE": key}
	if auth != "" {
		env["COORDINATOR_SERVER_TLS_CLIENT_AUTH"] = auth
		if auth != tlsfiles.ClientAuthNone {
			env["COORDINATOR_SERVER_TLS_CLIENT_CA_FILE"] = p.caFile
		}
	}
	return env
}

// restClient is an HTTPS client trusting the CA, with cert if not nil.
func (p *testPKI) restClient(t *testing.T, cert *tls.Certificate, http2 bool) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.ca.Pool()}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: http2}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// grpcHealth calls grpc.health.v1 Check over TLS, with cert if not nil.
func (p *testPKI) grpcHealth(t *testing.T, addr string, cert *tls.Certificate) error {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.ca.Pool()}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		err = fmt.Errorf("health: %s", resp.GetStatus())
	}
	return err
}

// servedCN is the common name of the certificate addr serves now.
func (p *testPKI) servedCN(t *testing.T, addr string, protos ...string) string {
	t.Helper()
	cn, err := p.dialCN(addr, protos...)
	require.NoError(t, err)
	return cn
}

func (p *testPKI) dialCN(addr string, protos ...string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: p.ca.Pool(), NextProtos: protos, Certificates: []tls.Certificate{p.client}})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// plainClient is an HTTP client without TLS.
func plainClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func postChat(t *testing.T, c *http.Client, url string) (*http.Response, string, error) {
	t.Helper()
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// TestTLSListeners serves REST and gRPC over TLS in each client_auth mode.
func TestTLSListeners(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "server", "coordinator")
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	tests := []struct {
		name           string
		clientAuth     string
		refusedWithout bool // a client without a certificate is refused
	}{
		{name: "TLS", clientAuth: ""},
		{name: "client_auth none", clientAuth: tlsfiles.ClientAuthNone},
		{name: "client_auth request", clientAuth: tlsfiles.ClientAuthRequest},
		{name: "client_auth require", clientAuth: tlsfiles.ClientAuthRequire, refusedWithout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := startTLSStack(t, pki.serverEnv(cert, key, tt.clientAuth), gw, "", decodeOnly)
			url := "https://" + st.rest

			resp, body, err := postChat(t, pki.restClient(t, &pki.client, true), url)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, "HTTP/2.0", resp.Proto, "h2 by ALPN")
			assert.Contains(t, body, `"chat.completion"`)
			require.NoError(t, pki.grpcHealth(t, st.grpc, &pki.client))

			resp, body, err = postChat(t, pki.restClient(t, nil, false), url)
			if tt.refusedWithout {
				assert.ErrorContains(t, err, "certificate required")
			} else {
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode, body)
				assert.Equal(t, "HTTP/1.1", resp.Proto, "HTTP/1.1 clients are served too")
			}
			err = pki.grpcHealth(t, st.grpc, nil)
			if tt.refusedWithout {
				assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
			} else {
				assert.NoError(t, err)
			}

			plain, err := plainClient(t).Get("http://" + st.rest + "/healthz")
			require.NoError(t, err)
			plain.Body.Close()
			assert.Equal(t, http.StatusBadRequest, plain.StatusCode, "no plaintext on a TLS listener")
		})
	}
}

// TestTLSGRPCOwnFiles gives the gRPC listener its own certificate and
// mutual TLS while REST serves plain TLS.
func TestTLSGRPCOwnFiles(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	restCert, restKey := pki.issue(t, "rest", "rest")
	grpcCert, grpcKey := pki.issue(t, "grpc", "grpc")
	env := pki.serverEnv(restCert, restKey, "")
	env["COORDINATOR_SERVER_GRPC_TLS_CERT_FILE"] = grpcCert
	env["COORDINATOR_SERVER_GRPC_TLS_KEY_FILE"] = grpcKey
	env["COORDINATOR_SERVER_GRPC_TLS_CLIENT_CA_FILE"] = pki.caFile // client_auth defaults to require
	st := startTLSStack(t, env, "http://127.0.0.1:1", "", decodeOnly)

	assert.Equal(t, "rest", pki.servedCN(t, st.rest))
	assert.Equal(t, "grpc", pki.servedCN(t, st.grpc, "h2"))
	require.NoError(t, pki.grpcHealth(t, st.grpc, &pki.client))
	assert.Equal(t, codes.Unavailable, status.Code(pki.grpcHealth(t, st.grpc, nil)))
	resp, err := pki.restClient(t, nil, true).Get("https://" + st.rest + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// recordingTLSServer serves h over https with a certificate of pki's CA,
// requiring a client certificate of the CA, and records each request's
// protocol and client certificate.
type recordingTLSServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func (p *testPKI) startHTTPS(t *testing.T, h http.Handler) *recordingTLSServer {
	t.Helper()
	s := &recordingTLSServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Proto+" "+r.TLS.PeerCertificates[0].Subject.CommonName)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.ca.Issue(t, "upstream").TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.ca.Pool(),
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *recordingTLSServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// TestTLSGateway reaches an https gateway that requires a client
// certificate, over h2.
func TestTLSGateway(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "coordinator", "coordinator")
	tests := []struct {
		name   string
		env    map[string]string
		status int
	}{
		{name: "client certificate", status: http.StatusOK, env: map[string]string{
			"COORDINATOR_GATEWAY_TLS_CA_FILE": pki.caFile, "COORDINATOR_GATEWAY_TLS_CERT_FILE": cert, "COORDINATOR_GATEWAY_TLS_KEY_FILE": key}},
		{name: "no client certificate", status: http.StatusBadGateway, env: map[string]string{
			"COORDINATOR_GATEWAY_TLS_CA_FILE": pki.caFile}},
		{name: "gateway not trusted", status: http.StatusBadGateway, env: map[string]string{
			"COORDINATOR_GATEWAY_TLS_CERT_FILE": cert, "COORDINATOR_GATEWAY_TLS_KEY_FILE": key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := pki.startHTTPS(t, sim.New(sim.Options{Strict: true}).Gateway())
			st := startStackEnv(t, tt.env, gw.URL, "", decodeOnly)
			resp := st.post(t, "/v1/chat/completions", chatBody, nil)
			body := readAll(t, resp.Body)
			assert.Equal(t, tt.status, resp.StatusCode, body)
			if tt.status == http.StatusOK {
				assert.Equal(t, []string{"HTTP/2.0 coordinator"}, gw.requests())
			} else {
				assert.Empty(t, gw.requests())
			}
		})
	}
}

// TestTLSGatewayInsecureSkipVerify reaches a gateway whose CA it does not
// know, and warns about it once at startup.
func TestTLSGatewayInsecureSkipVerify(t *testing.T) {
	t.Parallel()
	gw := httptest.NewTLSServer(sim.New(sim.Options{Strict: true}).Gateway())
	t.Cleanup(gw.Close)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
log_level: 2
server: {listen_addr: "127.0.0.1:0", grpc_listen_addr: "127.0.0.1:0"}
gateway:
  address: %q
  tls: {insecure_skip_verify: true}
%s`, gw.URL, decodeOnly)), nil)
	require.NoError(t, err)
	var logs syncBuffer
	var addrs *service.Addresses
	app := fx.New(App(cfg, logging.NewLogger(&logs, cfg.LogLevel)), fx.Populate(&addrs))
	require.NoError(t, app.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, app.Stop(context.Background())) })

	resp, err := plainClient(t).Post("http://"+addrs.REST()+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	warnings := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "insecure_skip_verify is true") {
			warnings++
			assert.Contains(t, line, "WARN")
			assert.Contains(t, line, "gateway.tls")
		}
	}
	assert.Equal(t, 1, warnings)
}

// TestTLSRender renders through an https render service that requires a
// client certificate.
func TestTLSRender(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "coordinator", "coordinator")
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	render := pki.startHTTPS(t, s.Render())
	st := startStack(t, gw, render.URL, fmt.Sprintf(`
pipeline:
  use_openai_format: false
  steps:
    - type: render
      params:
        address: RENDER_URL
        tls: {ca_file: %q, cert_file: %q, key_file: %q}
    - type: prefill
    - type: decode
`, pki.caFile, cert, key))
	resp := st.post(t, "/v1/chat/completions", chatBody, nil)
	body := readAll(t, resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, []string{"HTTP/2.0 coordinator"}, render.requests())
}

// TestTLSRotation swaps the listener's files: the next handshake serves
// the new certificate, on both listeners, and the reload is counted.
func TestTLSRotation(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "server", "first")
	st := startTLSStack(t, pki.serverEnv(cert, key, ""), "http://127.0.0.1:1", "", decodeOnly)
	require.Equal(t, "first", pki.servedCN(t, st.rest))

	second := pki.ca.Issue(t, "second")
	second.Write(t, pki.dir, "server")
	// Files are checked at most once a second, on a handshake.
	require.Eventually(t, func() bool { cn, err := pki.dialCN(st.rest); return err == nil && cn == "second" }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, "second", pki.servedCN(t, st.grpc, "h2"), "gRPC shares server.tls")

	resp, err := pki.restClient(t, nil, true).Get("https://" + st.rest + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	metrics := readAll(t, resp.Body)
	assert.Contains(t, metrics, `coordinator_tls_reloads_total{file_set="server.tls",result="ok"} 1`)
}

// TestTLSBadConfigFailsStartup: each bad TLS setting stops the coordinator
// with one line naming the key.
func TestTLSBadConfigFailsStartup(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "server", "coordinator")
	_, otherKey := pki.issue(t, "other", "other")
	expiredCert, expiredKey := pki.ca.Issue(t, "expired",
		tlsfilestest.Valid(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))).Write(t, pki.dir, "expired")
	missing := filepath.Join(pki.dir, "missing.pem")

	tests := []struct {
		name      string
		yaml      string
		configErr string // rejected by config.Parse
		appErr    string // rejected by the fx app
	}{
		{name: "missing certificate", yaml: fmt.Sprintf("server:\n  tls: {cert_file: %q, key_file: %q}\n", missing, key),
			appErr: "server.tls.cert_file: open " + missing + ": no such file or directory"},
		{name: "key of another certificate", yaml: fmt.Sprintf("server:\n  grpc_tls: {cert_file: %q, key_file: %q}\n", cert, otherKey),
			appErr: "server.grpc_tls.key_file: " + otherKey + ": tls: private key does not match public key"},
		{name: "expired client certificate", yaml: fmt.Sprintf("gateway:\n  tls: {cert_file: %q, key_file: %q}\n", expiredCert, expiredKey),
			appErr: "gateway.tls.cert_file: " + expiredCert + ": certificate expired on 2026-01-01T00:00:00Z"},
		{name: "render CA missing", yaml: fmt.Sprintf("render_tls: {ca_file: %q}\n", missing),
			appErr: "pipeline.steps[0] (render): tls.ca_file: open " + missing + ": no such file or directory"},
		{name: "unknown client_auth", yaml: fmt.Sprintf("server:\n  tls: {cert_file: %q, key_file: %q, client_auth: mutual}\n", cert, key),
			configErr: `server.tls.client_auth: must be none, request or require, got "mutual"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse([]byte(badTLSConfig(tt.yaml)), nil)
			if tt.configErr != "" {
				assert.EqualError(t, err, tt.configErr)
				return
			}
			require.NoError(t, err)
			app := fx.New(App(cfg, logging.NewLogger(io.Discard, 1)))
			require.Error(t, app.Err())
			assert.EqualError(t, dig.RootCause(app.Err()), tt.appErr, "what main prints")
		})
	}
}

// badTLSConfig completes a config around the server, gateway or
// render_tls (the render step's tls object) given.
func badTLSConfig(part string) string {
	server := "server:\n"
	gateway := "gateway:\n"
	renderTLS := ""
	switch {
	case strings.HasPrefix(part, "server:\n"):
		server = part
	case strings.HasPrefix(part, "gateway:\n"):
		gateway = part
	default:
		renderTLS = "        tls: " + strings.TrimPrefix(strings.TrimSpace(part), "render_tls: ") + "\n"
	}
	return server + `  listen_addr: "127.0.0.1:0"
  grpc_listen_addr: "127.0.0.1:0"
` + gateway + `  address: "https://127.0.0.1:1"
pipeline:
  steps:
    - type: render
      params:
        address: "https://127.0.0.1:1"
` + renderTLS + `    - type: decode
`
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
