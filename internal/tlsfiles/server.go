package tlsfiles

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// Client authentication modes, the values of client_auth.
const (
	ClientAuthNone    = "none"    // no client certificate asked for
	ClientAuthRequest = "request" // asked for; a client without one is served, one with a bad one refused
	ClientAuthRequire = "require" // mutual TLS: a client without a valid certificate is refused
)

// ServerConfig is a listener's tls object (server.tls, server.grpc_tls).
// The zero value serves plaintext.
type ServerConfig struct {
	// CertFile is the PEM certificate chain the listener presents, leaf
	// first. Required. Key cert_file.
	CertFile string `param:"cert_file"`
	// KeyFile is the PEM private key of the leaf. Required. Key key_file.
	KeyFile string `param:"key_file"`
	// ClientCAFile is the PEM bundle of CAs that client certificates must
	// chain to. Required when client_auth is request or require. Key
	// client_ca_file.
	ClientCAFile string `param:"client_ca_file"`
	// ClientAuth is none, request or require (mutual TLS). Default require
	// when client_ca_file is set, else none. Key client_auth.
	ClientAuth string `param:"client_auth"`
}

// Enabled reports whether any key is set: the listener serves TLS.
func (c ServerConfig) Enabled() bool { return c != ServerConfig{} }

// Validate checks the keys without reading the files; an error starts with
// the key at fault.
func (c ServerConfig) Validate() error {
	switch {
	case !c.Enabled():
		return nil
	case c.CertFile == "":
		return errors.New("cert_file: required")
	case c.KeyFile == "":
		return errors.New("key_file: required")
	}
	switch c.clientAuth() {
	case ClientAuthNone:
		if c.ClientCAFile != "" {
			return errors.New("client_ca_file: set but client_auth is none")
		}
	case ClientAuthRequest, ClientAuthRequire:
		if c.ClientCAFile == "" {
			return fmt.Errorf("client_ca_file: required when client_auth is %s", c.ClientAuth)
		}
	default:
		return fmt.Errorf("client_auth: must be none, request or require, got %q", c.ClientAuth)
	}
	return nil
}

// clientAuth is ClientAuth with its default.
func (c ServerConfig) clientAuth() string {
	switch {
	case c.ClientAuth != "":
		return c.ClientAuth
	case c.ClientCAFile != "":
		return ClientAuthRequire
	}
	return ClientAuthNone
}

// Server is a listener's certificate, and client CAs, reloaded from their
// files. Safe for concurrent use.
type Server struct {
	files *reloader
	auth  tls.ClientAuthType
}

// NewServer validates c and loads its files. An error starts with the key at
// fault ("cert_file: open /x: no such file or directory"); the caller puts
// the object's own key in front.
func NewServer(c ServerConfig, opts Options) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, errors.New("cert_file: required")
	}
	r, err := newReloader(files{certFile: c.CertFile, keyFile: c.KeyFile, caFile: c.ClientCAFile, caKey: "client_ca_file"}, opts)
	if err != nil {
		return nil, err
	}
	auth := tls.NoClientCert
	switch c.clientAuth() {
	case ClientAuthRequest:
		auth = tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		auth = tls.RequireAndVerifyClientCert
	}
	return &Server{files: r, auth: auth}, nil
}

// TLSConfig is a listener's config: each handshake gets the certificate and
// client CAs loaded last (GetConfigForClient) and offers nextProtos by ALPN
// ("h2", "http/1.1" for HTTP; "h2" for gRPC). Several listeners may share
// one Server.
func (s *Server) TLSConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := s.files.current()
			return &tls.Config{
				MinVersion:   MinVersion,
				Certificates: []tls.Certificate{*l.cert},
				ClientCAs:    l.pool,
				ClientAuth:   s.auth,
				NextProtos:   nextProtos,
			}, nil
		},
	}
}
