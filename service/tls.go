package service

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// ListenerTLS is the TLS of the two listeners, from server.tls and
// server.grpc_tls; a nil config serves plaintext. The certificates are
// reloaded when their files change.
type ListenerTLS struct {
	// REST offers h2 and http/1.1 by ALPN.
	REST *tls.Config
	// GRPC offers h2 by ALPN.
	GRPC *tls.Config
}

// NewListenerTLS loads the listeners' certificate files. A bad file fails
// with the key at fault, e.g. "server.tls.cert_file: open /x: no such file
// or directory". Without server.grpc_tls, gRPC shares server.tls's files.
func NewListenerTLS(cfg config.Config, log *slog.Logger, reloads tlsfiles.Observer) (*ListenerTLS, error) {
	var out ListenerTLS
	var grpcFiles *tlsfiles.Server
	if cfg.Server.TLS.Enabled() {
		files, err := tlsfiles.NewServer(cfg.Server.TLS, tlsfiles.Options{Name: "server.tls", Log: log, Observer: reloads})
		if err != nil {
			return nil, fmt.Errorf("server.tls.%w", err)
		}
		out.REST = files.TLSConfig("h2", "http/1.1")
		grpcFiles = files
	}
	if cfg.Server.GRPCTLS.Enabled() {
		files, err := tlsfiles.NewServer(cfg.Server.GRPCTLS, tlsfiles.Options{Name: "server.grpc_tls", Log: log, Observer: reloads})
		if err != nil {
			return nil, fmt.Errorf("server.grpc_tls.%w", err)
		}
		grpcFiles = files
	}
	if grpcFiles != nil {
		out.GRPC = grpcFiles.TLSConfig("h2")
	}
	return &out, nil
}

// gatewayTLS is the gateway client's per-connection TLS config from
// gateway.tls, or nil when the key is absent.
func gatewayTLS(cfg config.Gateway, log *slog.Logger, reloads tlsfiles.Observer) (func() *tls.Config, error) {
	if !cfg.TLS.Enabled() {
		return nil, nil
	}
	files, err := tlsfiles.NewClient(cfg.TLS, tlsfiles.Options{Name: "gateway.tls", Log: log, Observer: reloads})
	if err != nil {
		return nil, fmt.Errorf("gateway.tls.%w", err)
	}
	return files.TLSConfig, nil
}

// tlsReloads reports the TLS file reloads to the metrics.
func tlsReloads(m *metrics.Metrics) tlsfiles.Observer { return m }
