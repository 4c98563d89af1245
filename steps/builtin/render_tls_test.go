package builtin_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

func TestRenderTLSParams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	const addr = "https://render.svc:8443"
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{name: "tls on an http address", params: map[string]any{"address": "http://render:8000", "tls": map[string]any{"server_name": "render"}},
			wantErr: `tls: set but address "http://render:8000" is not https`},
		{name: "cert without key", params: map[string]any{"address": addr, "tls": map[string]any{"cert_file": "c.pem"}},
			wantErr: "tls.key_file: required with cert_file"},
		{name: "missing CA file", params: map[string]any{"address": addr, "tls": map[string]any{"ca_file": missing}},
			wantErr: "tls.ca_file: open " + missing + ": no such file or directory"},
		{name: "unknown key", params: map[string]any{"address": addr, "tls": map[string]any{"ca": "x"}},
			wantErr: `tls: unknown key "ca" (known: ca_file, cert_file, insecure_skip_verify, key_file, server_name)`},
		{name: "wrong type", params: map[string]any{"address": addr, "tls": map[string]any{"insecure_skip_verify": "yes"}},
			wantErr: "tls.insecure_skip_verify: expected bool, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewRenderPlugin(builtin.RenderDeps{}).New(tt.params)
			assert.Nil(t, step)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

// TestRenderOverTLS renders through an https render service that requires
// a client certificate.
func TestRenderOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "coordinator").Write(t, dir, "client")
	var mu sync.Mutex
	var protos []string
	render := sim.New(sim.Options{}).Render()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto+" "+r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
		render.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "render").TLS(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	tests := []struct {
		name    string
		tls     map[string]any
		wantErr bool
	}{
		{name: "client certificate", tls: map[string]any{"ca_file": caFile, "cert_file": cert, "key_file": key}},
		{name: "no client certificate", tls: map[string]any{"ca_file": caFile}, wantErr: true},
		{name: "untrusted render service", tls: map[string]any{"cert_file": cert, "key_file": key}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step := newRender(t, srv.URL, map[string]any{"tls": tt.tls})
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Body: []byte(`{"model":"sim-model","prompt":"Hello there"}`)}
			err := step.Execute(context.Background(), rc)
			if tt.wantErr {
				var te *gateway.TransportError
				assert.ErrorAs(t, err, &te)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, rc.Tokens.IDs())
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"HTTP/2.0 coordinator"}, protos, "h2 by ALPN, with the client certificate")
		})
	}
}

func TestRenderInsecureSkipVerifyWarns(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	step, err := builtin.NewRenderPlugin(builtin.RenderDeps{Log: slog.New(slog.NewTextHandler(&logs, nil))}).New(map[string]any{
		"address": "https://render:8443", "tls": map[string]any{"insecure_skip_verify": true},
	})
	require.NoError(t, err)
	step.(*builtin.Render).Close()
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "file_set=render.tls")
}
