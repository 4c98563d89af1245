package control

import (
	"crypto/tls"
	"log/slog"
	"net/http"

	"github.com/coordinator-project/coordinator/service/metrics"
)

// NewHandler exposes newHandler to the tests.
func NewHandler(srv *Server, token string, m *metrics.Control) http.Handler {
	return newHandler(srv, token, m)
}

// NewListener exposes the listener to the tests: serve on lis, close with
// its close.
func NewListener(h http.Handler, tlsConfig *tls.Config) *Listener {
	return newListener(h, tlsConfig, slog.New(slog.DiscardHandler))
}

// Listener is listener, exported for the tests.
type Listener = listener

// Serve is serve.
var Serve = (*listener).serve

// Close is close.
var Close = (*listener).close
