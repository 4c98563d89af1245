package tlsfiles_test

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/internal/tlsfiles/tlsfilestest"
)

func TestServerConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     tlsfiles.ServerConfig
		wantErr string
	}{
		{name: "zero is plaintext", cfg: tlsfiles.ServerConfig{}},
		{name: "cert and key", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k"}},
		{name: "client CA defaults to require", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca"}},
		{name: "request", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "request"}},
		{name: "explicit none", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientAuth: "none"}},

		{name: "no cert", cfg: tlsfiles.ServerConfig{KeyFile: "k"}, wantErr: "cert_file: required"},
		{name: "no key", cfg: tlsfiles.ServerConfig{CertFile: "c"}, wantErr: "key_file: required"},
		{name: "client auth alone", cfg: tlsfiles.ServerConfig{ClientAuth: "require"}, wantErr: "cert_file: required"},
		{name: "unknown client_auth", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientAuth: "always"},
			wantErr: `client_auth: must be none, request or require, got "always"`},
		{name: "require without CA", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientAuth: "require"},
			wantErr: "client_ca_file: required when client_auth is require"},
		{name: "request without CA", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientAuth: "request"},
			wantErr: "client_ca_file: required when client_auth is request"},
		{name: "CA with none", cfg: tlsfiles.ServerConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "none"},
			wantErr: "client_ca_file: set but client_auth is none"},
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

func TestNewServerLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "server").Write(t, dir, "server")
	_, otherKey := ca.Issue(t, "other").Write(t, dir, "other")
	expiredCert, expiredKey := ca.Issue(t, "old", tlsfilestest.Valid(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))).Write(t, dir, "expired")
	futureCert, futureKey := ca.Issue(t, "new", tlsfilestest.Valid(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC))).Write(t, dir, "future")
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not pem"), 0o600))
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name    string
		cfg     tlsfiles.ServerConfig
		wantErr string
	}{
		{name: "missing cert", cfg: tlsfiles.ServerConfig{CertFile: missing, KeyFile: key},
			wantErr: "cert_file: open " + missing + ": no such file or directory"},
		{name: "missing key", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: missing},
			wantErr: "key_file: open " + missing + ": no such file or directory"},
		{name: "key of another certificate", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: otherKey},
			wantErr: "key_file: " + otherKey + ": tls: private key does not match public key"},
		{name: "expired", cfg: tlsfiles.ServerConfig{CertFile: expiredCert, KeyFile: expiredKey},
			wantErr: "cert_file: " + expiredCert + ": certificate expired on 2026-01-01T00:00:00Z"},
		{name: "not yet valid", cfg: tlsfiles.ServerConfig{CertFile: futureCert, KeyFile: futureKey},
			wantErr: "cert_file: " + futureCert + ": certificate not valid before 2100-01-01T00:00:00Z"},
		{name: "cert not PEM", cfg: tlsfiles.ServerConfig{CertFile: garbage, KeyFile: key},
			wantErr: "cert_file: " + garbage + ": no PEM certificate found"},
		{name: "key not PEM", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: garbage},
			wantErr: "key_file: " + garbage + ": tls: failed to find any PEM data in key input"},
		{name: "missing client CA", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: key, ClientCAFile: missing},
			wantErr: "client_ca_file: open " + missing + ": no such file or directory"},
		{name: "client CA not PEM", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: key, ClientCAFile: garbage},
			wantErr: "client_ca_file: " + garbage + ": no PEM certificate found"},
		{name: "unknown client_auth", cfg: tlsfiles.ServerConfig{CertFile: cert, KeyFile: key, ClientCAFile: caFile, ClientAuth: "maybe"},
			wantErr: `client_auth: must be none, request or require, got "maybe"`},
		{name: "zero", cfg: tlsfiles.ServerConfig{}, wantErr: "cert_file: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := tlsfiles.NewServer(tt.cfg, tlsfiles.Options{Name: "server.tls"})
			assert.Nil(t, s)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestServerClientAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca.crt")
	cert, key := ca.Issue(t, "server").Write(t, dir, "server")
	clientCert := ca.Issue(t, "client").TLS(t)
	strangerCert := tlsfilestest.NewCA(t, "stranger").Issue(t, "stranger").TLS(t)

	tests := []struct {
		name       string
		clientAuth string
		cert       *tls.Certificate
		wantErr    string // the client's error; "" when served
		wantPeer   string // the client certificate the server saw
	}{
		{name: "none serves anyone", clientAuth: "none"},
		{name: "none ignores a certificate", clientAuth: "none", cert: &clientCert},
		{name: "request serves without a certificate", clientAuth: "request"},
		{name: "request verifies a given certificate", clientAuth: "request", cert: &clientCert, wantPeer: "client"},
		{name: "request refuses a stranger's", clientAuth: "request", cert: &strangerCert, wantErr: "unknown certificate authority"},
		{name: "require refuses without a certificate", clientAuth: "require", wantErr: "certificate required"},
		{name: "require serves a valid certificate", clientAuth: "require", cert: &clientCert, wantPeer: "client"},
		{name: "require refuses a stranger's", clientAuth: "require", cert: &strangerCert, wantErr: "unknown certificate authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tlsfiles.ServerConfig{CertFile: cert, KeyFile: key, ClientAuth: tt.clientAuth}
			if tt.clientAuth != "none" {
				cfg.ClientCAFile = caFile
			}
			s, err := tlsfiles.NewServer(cfg, tlsfiles.Options{Name: "server.tls"})
			require.NoError(t, err)
			client := &tls.Config{RootCAs: ca.Pool()}
			if tt.cert != nil {
				client.GetClientCertificate = sendAlways(tt.cert)
			}
			state, srv, err := dial(t, s.TLSConfig("h2", "http/1.1"), client)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Error(t, srv.err)
				return
			}
			require.NoError(t, err)
			require.NoError(t, srv.err)
			assert.Equal(t, "server", state.PeerCertificates[0].Subject.CommonName)
			var peer string
			if len(srv.state.PeerCertificates) > 0 && len(srv.state.VerifiedChains) > 0 {
				peer = srv.state.PeerCertificates[0].Subject.CommonName
			}
			assert.Equal(t, tt.wantPeer, peer)
		})
	}
}

func TestServerTLSConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	cert, key := ca.Issue(t, "server").Write(t, dir, "server")
	s, err := tlsfiles.NewServer(tlsfiles.ServerConfig{CertFile: cert, KeyFile: key}, tlsfiles.Options{})
	require.NoError(t, err)

	t.Run("ALPN", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name   string
			offer  []string
			server []string
			want   string
		}{
			{name: "h2 preferred", offer: []string{"h2", "http/1.1"}, server: []string{"h2", "http/1.1"}, want: "h2"},
			{name: "http/1.1 client", offer: []string{"http/1.1"}, server: []string{"h2", "http/1.1"}, want: "http/1.1"},
			{name: "grpc listener", offer: []string{"h2"}, server: []string{"h2"}, want: "h2"},
		} {
			state, srv, err := dial(t, s.TLSConfig(tt.server...), &tls.Config{RootCAs: ca.Pool(), NextProtos: tt.offer})
			require.NoError(t, err, tt.name)
			require.NoError(t, srv.err, tt.name)
			assert.Equal(t, tt.want, state.NegotiatedProtocol, tt.name)
		}
	})
	t.Run("TLS 1.1 refused", func(t *testing.T) {
		t.Parallel()
		_, srv, err := dial(t, s.TLSConfig(), &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		require.Error(t, err)
		assert.ErrorContains(t, srv.err, "unsupported versions")
	})
	t.Run("TLS 1.2 served", func(t *testing.T) {
		t.Parallel()
		state, _, err := dial(t, s.TLSConfig(), &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12})
		require.NoError(t, err)
		assert.Equal(t, uint16(tls.VersionTLS12), state.Version)
	})
}

// TestServerReload swaps the files and sees the next handshake after the
// check interval serve the new certificate; a broken swap keeps the old one.
func TestServerReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	first := ca.Issue(t, "first")
	cert, key := first.Write(t, dir, "server")
	clk, obs, logs := newClock(), &reloads{}, &logBuffer{}
	s, err := tlsfiles.NewServer(tlsfiles.ServerConfig{CertFile: cert, KeyFile: key}, tlsfiles.Options{
		Name: "server.tls", Log: slog.New(slog.NewTextHandler(logs, nil)), Observer: obs, Now: clk.Now, CheckInterval: time.Second,
	})
	require.NoError(t, err)
	cfg := s.TLSConfig("h2")
	client := &tls.Config{RootCAs: ca.Pool()}
	served := func() string {
		t.Helper()
		state, _, err := dial(t, cfg, client)
		require.NoError(t, err)
		return state.PeerCertificates[0].Subject.CommonName
	}

	assert.Equal(t, "first", served())
	ca.Issue(t, "second").Write(t, dir, "server")
	assert.Equal(t, "first", served(), "files are not checked again within the interval")
	assert.Empty(t, obs.got())

	clk.advance(time.Second)
	assert.Equal(t, "second", served())
	assert.Equal(t, []string{"server.tls ok"}, obs.got())
	assert.Contains(t, logs.String(), `level=INFO msg="tls files reloaded" file_set=server.tls`)

	clk.advance(time.Second)
	assert.Equal(t, "second", served(), "unchanged files are not reloaded")
	assert.Len(t, obs.got(), 1)

	// Half a rotation: a new certificate next to the old key.
	require.NoError(t, os.WriteFile(cert, ca.Issue(t, "third").CertPEM, 0o600))
	clk.advance(time.Second)
	assert.Equal(t, "second", served(), "a failed reload keeps the previous files")
	assert.Equal(t, []string{"server.tls ok", "server.tls error"}, obs.got())
	assert.Contains(t, logs.String(), `level=ERROR msg="tls reload failed; keeping the previous files" file_set=server.tls error="server.tls.key_file:`)

	clk.advance(time.Second)
	served()
	assert.Len(t, obs.got(), 2, "a failed reload is not retried until the files change again")

	third := ca.Issue(t, "third")
	third.Write(t, dir, "server")
	clk.advance(time.Second)
	assert.Equal(t, "third", served())
	assert.Equal(t, []string{"server.tls ok", "server.tls error", "server.tls ok"}, obs.got())
}

// TestServerReloadClientCA rotates the client CA bundle: the next handshake
// verifies clients against the new one.
func TestServerReloadClientCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, next := tlsfilestest.NewCA(t, "ca"), tlsfilestest.NewCA(t, "next")
	cert, key := ca.Issue(t, "server").Write(t, dir, "server")
	caFile := ca.WriteCA(t, dir, "clients.crt")
	clk := newClock()
	s, err := tlsfiles.NewServer(tlsfiles.ServerConfig{CertFile: cert, KeyFile: key, ClientCAFile: caFile},
		tlsfiles.Options{Name: "server.tls", Now: clk.Now})
	require.NoError(t, err)
	cfg := s.TLSConfig()
	oldCert, newCert := ca.Issue(t, "old").TLS(t), next.Issue(t, "new").TLS(t)
	oldClient := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: sendAlways(&oldCert)}
	newClient := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: sendAlways(&newCert)}

	_, _, err = dial(t, cfg, oldClient)
	require.NoError(t, err)
	next.WriteCA(t, dir, "clients.crt")
	clk.advance(time.Second)
	_, _, err = dial(t, cfg, newClient)
	require.NoError(t, err)
	_, _, err = dial(t, cfg, oldClient)
	assert.ErrorContains(t, err, "unknown certificate authority")
}
