package tlsfiles

import (
	"crypto/tls"
	"errors"
)

// ClientConfig is an outbound client's tls object (gateway.tls, the render
// step's tls). The zero value uses Go's defaults: the system's CAs, no
// client certificate.
type ClientConfig struct {
	// CAFile is the PEM bundle of CAs the server's certificate must chain
	// to, instead of the system's. Key ca_file.
	CAFile string `param:"ca_file"`
	// CertFile is the PEM client certificate chain, for servers that ask
	// for one (mutual TLS); set with key_file. Key cert_file.
	CertFile string `param:"cert_file"`
	// KeyFile is the PEM private key of the client certificate. Key
	// key_file.
	KeyFile string `param:"key_file"`
	// ServerName is the name the server's certificate must carry (and the
	// SNI sent), when it differs from the address's host. Key server_name.
	ServerName string `param:"server_name"`
	// InsecureSkipVerify accepts any server certificate. For tests only:
	// it is logged as a warning at startup. Key insecure_skip_verify.
	InsecureSkipVerify bool `param:"insecure_skip_verify"`
}

// Enabled reports whether any key is set.
func (c ClientConfig) Enabled() bool { return c != ClientConfig{} }

// Validate checks the keys without reading the files; an error starts with
// the key at fault.
func (c ClientConfig) Validate() error {
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		return errors.New("key_file: required with cert_file")
	case c.KeyFile != "" && c.CertFile == "":
		return errors.New("cert_file: required with key_file")
	case c.InsecureSkipVerify && c.CAFile != "":
		return errors.New("insecure_skip_verify: contradicts ca_file (verify against it, or not at all)")
	}
	return nil
}

// Client is an outbound client's CAs and certificate, reloaded from their
// files. Safe for concurrent use.
type Client struct {
	files      *reloader
	serverName string
	insecure   bool
}

// NewClient validates c and loads its files. An error starts with the key at
// fault; the caller puts the object's own key in front. insecure_skip_verify
// is logged at warn level, once.
func NewClient(c ClientConfig, opts Options) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r, err := newReloader(files{certFile: c.CertFile, keyFile: c.KeyFile, caFile: c.CAFile, caKey: "ca_file"}, opts)
	if err != nil {
		return nil, err
	}
	if c.InsecureSkipVerify {
		opts.log().Warn("TLS SERVER CERTIFICATES ARE NOT VERIFIED: insecure_skip_verify is true, "+
			"so anyone on the network path can impersonate the server; use it for tests only",
			"file_set", opts.Name)
	}
	return &Client{files: r, serverName: c.ServerName, insecure: c.InsecureSkipVerify}, nil
}

// TLSConfig returns a new config for one connection, with the CAs and
// client certificate loaded last: call it for each dial (a reloaded CA
// bundle applies from the next connection on). ServerName is server_name,
// or empty for the dialer to fill in; NextProtos is left to the dialer.
//
// A fresh config per connection, rather than one config with a custom
// VerifyPeerCertificate, keeps verification Go's own: RootCAs and
// GetClientCertificate are plain fields of a config nobody else holds.
func (c *Client) TLSConfig() *tls.Config {
	l := c.files.current()
	cfg := &tls.Config{
		MinVersion:         MinVersion,
		RootCAs:            l.pool, // nil: the system's
		ServerName:         c.serverName,
		InsecureSkipVerify: c.insecure, //nolint:gosec // the operator's choice, warned about at startup
	}
	if cert := l.cert; cert != nil {
		// Sent whatever CAs the server names as acceptable (Certificates
		// would send nothing when the list does not match).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}
