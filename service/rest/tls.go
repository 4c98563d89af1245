package rest

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
)

// withTLS makes srv serve TLS with cfg: HTTP/1.1 and HTTP/2 negotiated by
// ALPN, and no h2c (cleartext HTTP/2 is for the plaintext listener only).
// The server's own error lines, mostly failed handshakes (port probes,
// clients refused by mutual TLS), go to log at debug level.
func withTLS(srv *http.Server, cfg *tls.Config, log *slog.Logger) {
	srv.TLSConfig = cfg
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
}

// serveOn serves srv on lis, over TLS when srv has a TLS config.
func serveOn(srv *http.Server, lis net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(lis, "", "") // the certificate comes from TLSConfig
	}
	return srv.Serve(lis)
}
