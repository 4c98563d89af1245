package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
)

// pool is a client's connection pool.
type pool interface {
	http.RoundTripper
	CloseIdleConnections()
}

// Transports: the pools of a plain-http address (Options.Transport).
const (
	// TransportH1 is h1's, the default: each leg on its caller's
	// goroutine.
	TransportH1 = "h1"
	// TransportNetHTTP is net/http's Transport, as an https address's.
	TransportNetHTTP = "net/http"
)

// defaultTransport is the pool of a plain-http address whose
// Options.Transport is empty (tests run the package's suite on both).
var defaultTransport = TransportH1

// validTransport checks Options.Transport.
func validTransport(name string) error {
	switch name {
	case "", TransportH1, TransportNetHTTP:
		return nil
	}
	return fmt.Errorf("upstream: transport must be %q or %q, got %q", TransportH1, TransportNetHTTP, name)
}

// newTransport is the client's connection pool. A plain-http address gets
// h1's (TransportH1), which sends each leg on its caller's goroutine:
// net/http's keeps two goroutines a connection and hands each leg and
// answer across them; or net/http's when Options.Transport asks for it. An
// https one gets net/http's, which speaks HTTP/2 where the gateway offers
// it.
func newTransport(scheme string, dialer *net.Dialer, o Options) pool {
	name := o.Transport
	if name == "" {
		name = defaultTransport
	}
	if scheme == "http" && name == TransportH1 {
		return &HTTP1Transport{
			DialContext:           dialer.DialContext,
			MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
			IdleConnTimeout:       o.IdleConnTimeout,
			ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		}
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   dialer.Timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global cap: MaxIdleConnsPerHost bounds the single host
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       o.IdleConnTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		// Workers answer uncompressed; asking for gzip would make Go
		// decompress every streamed event for nothing.
		DisableCompression: true,
	}
	if o.TLS != nil {
		t.DialTLSContext = dialTLS(dialer, o.TLS)
	}
	return t
}

// dialTLS dials with a config from tlsConfig per connection: a fresh one, so
// a reloaded CA bundle or client certificate is used from the next
// connection on, and verification stays Go's own. The dialer's timeout
// bounds the connect and the handshake together. With ForceAttemptHTTP2 the
// transport speaks HTTP/2 on connections that negotiated h2.
func dialTLS(d *net.Dialer, tlsConfig func() *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := tlsConfig().Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		if len(cfg.NextProtos) == 0 {
			cfg.NextProtos = []string{"h2", "http/1.1"}
		}
		return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, network, addr)
	}
}
