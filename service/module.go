package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/inproc"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/responses"
	"github.com/coordinator-project/coordinator/steps"
)

// Module wires the gRPC side: the gateway client, the pipeline built from
// the "steps" group and the config, CoordinatorService, the gRPC server on
// server.grpc_listen_addr, and the in-process channel the REST front uses.
var Module = fx.Module("service",
	fx.Provide(newCoordinator, newInterceptors, newGRPCServer, fx.Private), // the module's own
	fx.Provide(
		newGatewayClient,
		newInFlight,
		newFleetVersion,
		fx.Annotate(newPipeline, fx.ParamTags(`group:"steps"`)),
		health.NewServer,
		newInProcess,
		NewAddresses,
		metrics.New,
		AdmissionCounters,
		newBudget,
		tlsReloads,
		NewListenerTLS,
		responses.New,
	),
	fx.Invoke(knownSteps, serveGRPC),
)

// newCoordinator is NewCoordinator serving the stored Responses of rs (nil:
// responses.store.backend off) and, with the control plane on, continuing
// the tokens requests a pause of adm's hold aborts.
func newCoordinator(p *steps.Pipeline, m *metrics.Metrics, log *slog.Logger, cfg config.Config, inFlight *legids.Registry, rs *responses.Store, adm *admission.Controller,
	version *fleet.Version) *Coordinator {
	c := NewCoordinator(p, m, log, cfg, inFlight)
	c.responses, c.fleetVersion = rs, version
	if cfg.Control.Enabled() {
		c.admission, c.hold = adm, adm.Hold()
	}
	return c
}

func newGatewayClient(lc fx.Lifecycle, cfg config.Config, log *slog.Logger, reloads tlsfiles.Observer) (*gateway.Client, error) {
	tlsConfig, err := gatewayTLS(cfg.Gateway, log, reloads)
	if err != nil {
		return nil, err
	}
	c, err := gateway.New(gateway.Options{
		Log:                   log,
		Address:               cfg.Gateway.Address,
		MaxIdleConnsPerHost:   cfg.Gateway.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.Gateway.IdleConnTimeout,
		ResponseHeaderTimeout: cfg.Gateway.Timeout,
		ConnectTimeout:        cfg.Gateway.ConnectTimeout,
		StreamIdleTimeout:     cfg.Gateway.StreamIdleTimeout,
		Retry:                 cfg.Gateway.Retry,
		Transport:             cfg.Gateway.Transport,
		MaxAnswerBytes:        cfg.Gateway.MaxAnswerBytes(),
		TLS:                   tlsConfig,
		UserAgent:             cfg.Gateway.UserAgent,
	})
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

// newPipeline builds the pipeline. Its steps' resources (connections such
// as a Redis client) open at start, before the listeners serve (a failure
// fails the start), and close at stop, after the servers drained.
func newPipeline(plugins []steps.Plugin, cfg config.Config, lc fx.Lifecycle) (*steps.Pipeline, error) {
	configs := make([]steps.StepConfig, len(cfg.Pipeline.Steps))
	for i, s := range cfg.Pipeline.Steps {
		configs[i] = steps.StepConfig{Type: s.Type, Params: s.Params}
	}
	p, err := steps.NewPipeline(plugins, configs, steps.Defaults{
		KVConnector:     cfg.Pipeline.KVConnector,
		ECConnector:     cfg.Pipeline.ECConnector,
		UseOpenAIFormat: cfg.Pipeline.UseOpenAIFormat,
	})
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StartStopHook(p.Start, p.Stop))
	return p, nil
}

// knownSteps starts the configured steps' duration series at 0.
func knownSteps(m *metrics.Metrics, p *steps.Pipeline) { m.KnownSteps(p.Names()) }

func newInterceptors(log *slog.Logger, adm *admission.Controller, cfg config.Config, budget *membudget.Budget) (*Interceptors, error) {
	return NewInterceptors(log, ChainOptions{
		Admission: adm, StreamWriteTimeout: cfg.Server.StreamWriteTimeout, Budget: budget,
		MaxMessageBytes: int(cfg.Server.MaxRequestBodyBytes()) + messageSlack,
	})
}

// grpcServerParams are what the gRPC server is built from.
type grpcServerParams struct {
	fx.In
	Service *Coordinator
	Chain   *Interceptors
	Health  *health.Server
	Metrics *metrics.Metrics
	Config  config.Config
	TLS     *ListenerTLS
}

func newGRPCServer(p grpcServerParams) *grpc.Server {
	// server.max_header_bytes bounds the call metadata as it bounds REST
	// headers (gRPC's own default is 16 MiB, forwarded to every leg).
	opts := []grpc.ServerOption{grpc.MaxHeaderListSize(uint32(min(p.Config.Server.MaxHeaderBytes, math.MaxUint32)))}
	if p.TLS.GRPC != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(p.TLS.GRPC)))
	}
	return NewGRPCServer(p.Service, p.Chain, p.Health, p.Metrics, p.Config.Server.MaxRequestBodyBytes(), opts...)
}

// InProcess is the REST front's client of CoordinatorService: calls run the
// same interceptors and handlers as network calls, in process (see
// inproc.Channel).
type InProcess struct {
	// Client is the CoordinatorService client over the in-process channel.
	Client coordinatorv1.CoordinatorServiceClient
	// Channel is the channel itself.
	Channel *inproc.Channel
}

// newInProcess builds the channel; its idle stream runners stop with the
// app.
func newInProcess(lc fx.Lifecycle, svc *Coordinator, chain *Interceptors, cfg config.Config) *InProcess {
	ch := inproc.NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, inproc.Options{
		Unary: chain.Unary, Stream: chain.Stream,
		MaxRecv: int(cfg.Server.MaxRequestBodyBytes()) + messageSlack,
		Pass:    handOver,
	})
	lc.Append(fx.StopHook(ch.Close))
	return &InProcess{Client: coordinatorv1.NewCoordinatorServiceClient(ch), Channel: ch}
}

// serveGRPC listens on server.grpc_listen_addr at start (a busy port fails
// startup) and serves there. At stop, after the Admission drain ended the
// inference calls, it closes the listener and lets what is left (health
// watches, queued-request lookups) end for up to admission.StopGrace, then closes
// the connections.
// grpcServing are what serveGRPC serves with.
type grpcServing struct {
	fx.In
	Lifecycle fx.Lifecycle
	Server    *grpc.Server
	Config    config.Config
	Ready     *admission.Readiness
	Addresses *Addresses
	Log       *slog.Logger
}

func serveGRPC(p grpcServing) {
	srv, cfg, ready, addrs, log := p.Server, p.Config, p.Ready, p.Addresses, p.Log
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", cfg.Server.GRPCListenAddr)
			if err != nil {
				return fmt.Errorf("server.grpc_listen_addr: %w", err)
			}
			addrs.SetGRPC(lis.Addr().String())
			log.Debug("grpc listening", "addr", lis.Addr().String(), "tls", cfg.Server.TLS.Enabled() || cfg.Server.GRPCTLS.Enabled())
			go serve(srv, lis, log)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			ready.Set(false)
			done := make(chan struct{})
			go func() { srv.GracefulStop(); close(done) }()
			grace := time.NewTimer(admission.StopGrace)
			defer grace.Stop()
			select {
			case <-done:
			case <-grace.C:
				srv.Stop()
			case <-ctx.Done():
				srv.Stop()
			}
			<-done
			return nil
		},
	})
}

func serve(srv *grpc.Server, lis net.Listener, log *slog.Logger) {
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		log.Error("grpc serve", "error", err)
	}
}

// handOver is the in-process channel's inproc.Options.Pass: dst (a new
// message of src's type) holds src's fields by reference, bytes, strings
// and nested messages shared, not copied. It knows the service's requests
// and replies, without reflection; another is copied.
func handOver(dst, src proto.Message) bool {
	switch d := dst.(type) {
	case *coordinatorv1.GenerateRequest:
		s := src.(*coordinatorv1.GenerateRequest)
		d.RequestId, d.Input = s.RequestId, s.Input
	case *coordinatorv1.GenerateStreamRequest:
		s := src.(*coordinatorv1.GenerateStreamRequest)
		d.RequestId, d.Input = s.RequestId, s.Input
	case *coordinatorv1.GenerateResponse:
		s := src.(*coordinatorv1.GenerateResponse)
		d.RequestId, d.Output = s.RequestId, s.Output
	case *coordinatorv1.GenerateStreamResponse:
		d.Chunk = src.(*coordinatorv1.GenerateStreamResponse).Chunk
	default:
		return false
	}
	return true
}

// AdmissionCounters are admission's counters in the service's metrics.
func AdmissionCounters(m *metrics.Metrics) admission.Counters {
	return admission.Counters{
		RejectedRequests:     m.Rejected(metrics.RejectedRequests),
		RejectedStreams:      m.Rejected(metrics.RejectedStreams),
		RejectedShuttingDown: m.Rejected(metrics.RejectedShuttingDown),
		ShutdownCut:          m.ShutdownCut,
		HoldOutcome:          m.HoldOutcome,
	}
}

// newInFlight is the registry of the requests in flight that the control
// plane's abort by id reads; nil (free on the request path) when
// control.listen_addr is off.
func newInFlight(cfg config.Config) *legids.Registry {
	if !cfg.Control.Enabled() {
		return nil
	}
	return &legids.Registry{}
}

// newFleetVersion is the fleet's weight version as the control plane
// learns it, which answers carry (x-weight-version); nil when
// control.listen_addr is off.
func newFleetVersion(cfg config.Config) *fleet.Version {
	if !cfg.Control.Enabled() {
		return nil
	}
	return &fleet.Version{}
}
