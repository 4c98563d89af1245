package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// Module serves the REST front on server.listen_addr.
var Module = fx.Module("rest",
	fx.Provide(newHandler),
	fx.Invoke(serveHTTP),
)

func newHandler(in *service.InProcess, cfg config.Config, ready *admission.Readiness, m *metrics.Metrics, p *steps.Pipeline,
	gateway *gateway.Client, adm *admission.Controller, log *slog.Logger, budget *membudget.Budget) (*Handler, error) {
	h, err := NewHandler(context.Background(), in.Client, cfg.Server.MaxRequestBodyBytes(), ready, m)
	if err != nil {
		return nil, err
	}
	store, _ := p.RequestStore()
	h.ServeQueued(store)
	h.holder = p
	h.budget = budget
	h.streamWriteTimeout = cfg.Server.StreamWriteTimeout
	h.trustTransfer = cfg.Server.TrustClientTransferParams
	h.limits = cfg.Server.DocumentLimits()
	h.trusted = headers.NewTrusted(cfg.Server.TrustedRoutingHeaders...)
	h.ServePassthrough(gateway, adm, log)
	return h, nil
}

// NewServer is the HTTP server of the REST front: HTTP/1.1 and h2c, the
// configured timeouts and header cap. A client that trickles its headers is
// cut after read_header_timeout, and its body after read_timeout (408);
// headers past max_header_bytes get 431; a response must be written within
// write_timeout (streams replace it with stream_write_timeout per write).
func NewServer(h http.Handler, cfg config.Server) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// serveHTTP listens at start (a busy port fails startup), over TLS when
// server.tls is set, each request traced (tracing.go). At stop, after the Admission drain ended the inference
// calls, it closes the listener and the idle connections and lets the
// requests left end for up to admission.StopGrace, then closes the rest.
func serveHTTP(lc fx.Lifecycle, h *Handler, cfg config.Config, addrs *service.Addresses, lt *service.ListenerTLS, log *slog.Logger) {
	srv := NewServer(traced(h), cfg.Server)
	if lt.REST != nil {
		withTLS(srv, lt.REST, log)
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", cfg.Server.ListenAddr)
			if err != nil {
				return fmt.Errorf("server.listen_addr: %w", err)
			}
			addrs.SetREST(lis.Addr().String())
			log.Debug("rest listening", "addr", lis.Addr().String(), "tls", lt.REST != nil)
			go func() {
				if err := serveOn(srv, lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("rest serve", "error", err)
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, admission.StopGrace)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				return srv.Close()
			}
			return nil
		},
	})
}
