package tlsfiles_test

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
)

func TestClientConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     tlsfiles.ClientConfig
		wantErr string
	}{
		{name: "zero is Go's defaults", cfg: tlsfiles.ClientConfig{}},
		{name: "every key", cfg: tlsfiles.ClientConfig{CAFile: "ca", CertFile: "c", KeyFile: "k", ServerName: "gw"}},
		{name: "skip verify with a certificate", cfg: tlsfiles.ClientConfig{CertFile: "c", KeyFile: "k", InsecureSkipVerify: true}},

		{name: "cert without key", cfg: tlsfiles.ClientConfig{CertFile: "c"}, wantErr: "key_file: required with cert_file"},
		{name: "key without cert", cfg: tlsfiles.ClientConfig{KeyFile: "k"}, wantErr: "cert_file: required with key_file"},
		{name: "skip verify with a CA", cfg: tlsfiles.ClientConfig{CAFile: "ca", InsecureSkipVerify: true},
			wantErr: "insecure_skip_verify: contradicts ca_file (verify against it, or not at all)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestNewClientLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	cert, key := ca.Issue(t, "client").Write(t, dir, "client")
	_, otherKey := ca.Issue(t, "other").Write(t, dir, "other")
	expiredCert, expiredKey := ca.Issue(t, "old", tlsfilestest.Valid(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))).Write(t, dir, "expired")
	empty := filepath.Join(dir, "empty.pem")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name    string
		cfg     tlsfiles.ClientConfig
		wantErr string
	}{
		{name: "missing CA", cfg: tlsfiles.ClientConfig{CAFile: missing}, wantErr: "ca_file: open " + missing + ": no such file or directory"},
		{name: "empty CA", cfg: tlsfiles.ClientConfig{CAFile: empty}, wantErr: "ca_file: " + empty + ": no PEM certificate found"},
		{name: "missing cert", cfg: tlsfiles.ClientConfig{CertFile: missing, KeyFile: key}, wantErr: "cert_file: open " + missing + ": no such file or directory"},
		{name: "key of another certificate", cfg: tlsfiles.ClientConfig{CertFile: cert, KeyFile: otherKey},
			wantErr: "key_file: " + otherKey + ": tls: private key does not match public key"},
		{name: "expired", cfg: tlsfiles.ClientConfig{CertFile: expiredCert, KeyFile: expiredKey},
			wantErr: "cert_file: " + expiredCert + ": certificate expired on 2026-01-01T00:00:00Z"},
		{name: "invalid", cfg: tlsfiles.ClientConfig{CertFile: cert}, wantErr: "key_file: required with cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tlsfiles.NewClient(tt.cfg, tlsfiles.Options{Name: "gateway.tls"})
			assert.Nil(t, c)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestClientVerifiesTheServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, stranger := tlsfilestest.NewCA(t, "ca"), tlsfilestest.NewCA(t, "stranger")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	server := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "server").TLS(t)}}
	named := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "named", tlsfilestest.Hosts("gateway.internal")).TLS(t)}}
	strangers := &tls.Config{Certificates: []tls.Certificate{stranger.Issue(t, "stranger").TLS(t)}}

	tests := []struct {
		name    string
		cfg     tlsfiles.ClientConfig
		server  *tls.Config
		wantErr string
	}{
		{name: "trusted by ca_file", cfg: tlsfiles.ClientConfig{CAFile: caFile}, server: server},
		{name: "not in the system roots", cfg: tlsfiles.ClientConfig{}, server: server, wantErr: "certificate signed by unknown authority"},
		{name: "another CA", cfg: tlsfiles.ClientConfig{CAFile: caFile}, server: strangers, wantErr: "certificate signed by unknown authority"},
		{name: "name mismatch", cfg: tlsfiles.ClientConfig{CAFile: caFile}, server: named, wantErr: "cannot validate certificate for 127.0.0.1"},
		{name: "server_name", cfg: tlsfiles.ClientConfig{CAFile: caFile, ServerName: "gateway.internal"}, server: named},
		{name: "insecure_skip_verify", cfg: tlsfiles.ClientConfig{InsecureSkipVerify: true}, server: strangers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tlsfiles.NewClient(tt.cfg, tlsfiles.Options{Name: "gateway.tls"})
			require.NoError(t, err)
			cfg := c.TLSConfig()
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			_, _, err = dial(t, tt.server, cfg)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			assert.NoError(t, err)
		})
	}
}

func TestClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "coordinator").Write(t, dir, "client")
	server := &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "server").TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	}

	without, err := tlsfiles.NewClient(tlsfiles.ClientConfig{CAFile: caFile}, tlsfiles.Options{})
	require.NoError(t, err)
	_, _, err = dial(t, server, without.TLSConfig())
	assert.ErrorContains(t, err, "certificate required")

	with, err := tlsfiles.NewClient(tlsfiles.ClientConfig{CAFile: caFile, CertFile: cert, KeyFile: key}, tlsfiles.Options{})
	require.NoError(t, err)
	_, srv, err := dial(t, server, with.TLSConfig())
	require.NoError(t, err)
	require.NoError(t, srv.err)
	assert.Equal(t, "coordinator", srv.state.PeerCertificates[0].Subject.CommonName)
}

// TestClientReload rotates the CA bundle and the client certificate: the
// next config trusts the new CA and sends the new certificate.
func TestClientReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, next := tlsfilestest.NewCA(t, "ca"), tlsfilestest.NewCA(t, "next")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "first").Write(t, dir, "client")
	clk, obs := newClock(), &reloads{}
	c, err := tlsfiles.NewClient(tlsfiles.ClientConfig{CAFile: caFile, CertFile: cert, KeyFile: key},
		tlsfiles.Options{Name: "gateway.tls", Observer: obs, Now: clk.Now})
	require.NoError(t, err)
	both := ca.Pool()
	both.AddCert(next.Cert())
	serverOf := func(ca *tlsfilestest.CA) *tls.Config {
		return &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "server").TLS(t)},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    both,
		}
	}
	clientsOf := func(srv *tls.Config) string {
		t.Helper()
		_, s, err := dial(t, srv, c.TLSConfig())
		require.NoError(t, err)
		return s.state.PeerCertificates[0].Subject.CommonName
	}
	old, rotated := serverOf(ca), serverOf(next)

	assert.Equal(t, "first", clientsOf(old))
	next.WriteCA(t, dir, "ca.crt")
	next.Issue(t, "second").Write(t, dir, "client")
	clk.advance(time.Second)
	assert.Equal(t, "second", clientsOf(rotated))
	_, _, err = dial(t, old, c.TLSConfig())
	assert.ErrorContains(t, err, "certificate signed by unknown authority", "the old CA is no longer trusted")
	assert.Equal(t, []string{"gateway.tls ok"}, obs.got())
}

func TestClientInsecureSkipVerifyWarns(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	c, err := tlsfiles.NewClient(tlsfiles.ClientConfig{InsecureSkipVerify: true},
		tlsfiles.Options{Name: "gateway.tls", Log: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	c.TLSConfig()
	c.TLSConfig()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, "once per client")
	assert.Contains(t, lines[0], "level=WARN")
	assert.Contains(t, lines[0], "insecure_skip_verify is true")
	assert.Contains(t, lines[0], "file_set=gateway.tls")
}
