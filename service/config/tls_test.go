package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/service/config"
)

func TestParseTLS(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
server:
  tls: {cert_file: /tls/rest.crt, key_file: /tls/rest.key, client_ca_file: /tls/ca.crt, client_auth: request}
  grpc_tls: {cert_file: /tls/grpc.crt, key_file: /tls/grpc.key}
gateway:
  address: https://gw:443
  tls: {ca_file: /tls/gw-ca.crt, cert_file: /tls/c.crt, key_file: /tls/c.key, server_name: gw.svc}
`), nil)
	require.NoError(t, err)
	assert.Equal(t, tlsfiles.ServerConfig{CertFile: "/tls/rest.crt", KeyFile: "/tls/rest.key", ClientCAFile: "/tls/ca.crt", ClientAuth: "request"}, cfg.Server.TLS)
	assert.Equal(t, tlsfiles.ServerConfig{CertFile: "/tls/grpc.crt", KeyFile: "/tls/grpc.key"}, cfg.Server.GRPCTLS)
	assert.Equal(t, tlsfiles.ClientConfig{CAFile: "/tls/gw-ca.crt", CertFile: "/tls/c.crt", KeyFile: "/tls/c.key", ServerName: "gw.svc"}, cfg.Gateway.TLS)
}

func TestParseTLSFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"COORDINATOR_SERVER_TLS_CERT_FILE":             "/env/tls.crt",
		"COORDINATOR_SERVER_TLS_KEY_FILE":              "/env/tls.key",
		"COORDINATOR_SERVER_GRPC_TLS_CLIENT_AUTH":      "",
		"COORDINATOR_GATEWAY_ADDRESS":                  "https://gw",
		"COORDINATOR_GATEWAY_TLS_INSECURE_SKIP_VERIFY": "true",
		"COORDINATOR_GATEWAY_TLS_SERVER_NAME":          "gw.svc",
	}
	cfg, err := config.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, tlsfiles.ServerConfig{CertFile: "/env/tls.crt", KeyFile: "/env/tls.key"}, cfg.Server.TLS)
	assert.False(t, cfg.Server.GRPCTLS.Enabled())
	assert.Equal(t, tlsfiles.ClientConfig{ServerName: "gw.svc", InsecureSkipVerify: true}, cfg.Gateway.TLS)
}

func TestParseTLSErrors(t *testing.T) {
	t.Parallel()
	const gw = "gateway:\n  address: https://gw\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "unknown client_auth", yaml: gw + "server:\n  tls: {cert_file: c, key_file: k, client_auth: optional}\n",
			wantErr: `server.tls.client_auth: must be none, request or require, got "optional"`},
		{name: "no key", yaml: gw + "server:\n  tls: {cert_file: c}\n", wantErr: "server.tls.key_file: required"},
		{name: "grpc require without CA", yaml: gw + "server:\n  grpc_tls: {cert_file: c, key_file: k, client_auth: require}\n",
			wantErr: "server.grpc_tls.client_ca_file: required when client_auth is require"},
		{name: "unknown tls key", yaml: gw + "server:\n  tls: {cert: c}\n",
			wantErr: `server.tls: unknown key "cert" (known: cert_file, client_auth, client_ca_file, key_file)`},
		{name: "tls not a map", yaml: gw + "server:\n  tls: true\n", wantErr: "server.tls: expected a map, got bool"},
		{name: "gateway tls on http", yaml: "gateway:\n  address: http://gw\n  tls: {server_name: gw}\n",
			wantErr: `gateway.tls: set but gateway.address "http://gw" is not https`},
		{name: "gateway cert without key", yaml: gw + "  tls: {cert_file: c}\n", wantErr: "gateway.tls.key_file: required with cert_file"},
		{name: "gateway skip verify type", yaml: gw + "  tls: {insecure_skip_verify: 1}\n",
			wantErr: "gateway.tls.insecure_skip_verify: expected bool, got int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.yaml), nil)
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}
