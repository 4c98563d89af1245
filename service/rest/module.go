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
	"github.com/coordinator-project/coordinator/service/responses"
	"github.com/coordinator-project/coordinator/steps"
)

// Module serves the REST front on server.listen_addr.
var Module = fx.Module("rest",
	fx.Provide(newHandler),
	fx.Invoke(serveHTTP),
)

// handlerParams are what the REST front is built from.
type handlerParams struct {
	fx.In
	InProcess *service.InProcess
	Config    config.Config
	Ready     *admission.Readiness
	Metrics   *metrics.Metrics
	Pipeline  *steps.Pipeline
	Gateway   *gateway.Client
	Admission *admission.Controller
	Log       *slog.Logger
	Budget    *membudget.Budget
	// Responses is the response store, nil when responses.store.backend
	// is off.
	Responses *responses.Store
}

func newHandler(p handlerParams) (*Handler, error) {
	store, _ := p.Pipeline.RequestStore()
	srv := p.Config.Server
	return NewHandler(context.Background(), p.InProcess.Client, Options{
		MaxBody: srv.MaxRequestBodyBytes(), Ready: p.Ready, Metrics: p.Metrics, Budget: p.Budget,
		Limits: srv.DocumentLimits(), Trusted: headers.NewTrusted(srv.TrustedRoutingHeaders...),
		TrustTransfer: srv.TrustClientTransferParams, StreamWriteTimeout: srv.StreamWriteTimeout,
		Queued: store, Holder: p.Pipeline, StoredResponses: p.Responses != nil,
		Passthrough: &Passthrough{Gateway: p.Gateway, Admission: p.Admission, Log: p.Log},
	})
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
// httpServing are what serveHTTP serves with.
type httpServing struct {
	fx.In
	Lifecycle fx.Lifecycle
	Handler   *Handler
	Config    config.Config
	Addresses *service.Addresses
	TLS       *service.ListenerTLS
	Log       *slog.Logger
}

func serveHTTP(p httpServing) {
	lc, cfg, addrs, lt, log := p.Lifecycle, p.Config, p.Addresses, p.TLS, p.Log
	srv := NewServer(traced(p.Handler), cfg.Server)
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
