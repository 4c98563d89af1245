package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/test/bufconn"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/upstream"
)

// Module wires the gRPC side: the gateway client, the pipeline built from
// the "steps" group and the config, CoordinatorService, the gRPC server on
// server.grpc_listen_addr, and an in-process connection the REST front uses.
var Module = fx.Module("service",
	fx.Provide(
		newGatewayClient,
		fx.Annotate(newPipeline, fx.ParamTags(`group:"steps"`)),
		NewCoordinator,
		health.NewServer,
		NewReadiness,
		newGRPCServer,
		newInProcess,
		NewAddresses,
	),
	fx.Invoke(serveGRPC),
)

func newGatewayClient(lc fx.Lifecycle, cfg config.Config) (*upstream.Client, error) {
	c, err := upstream.New(upstream.Options{
		Address:               cfg.Gateway.Address,
		MaxIdleConnsPerHost:   cfg.Gateway.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.Gateway.IdleConnTimeout,
		ResponseHeaderTimeout: cfg.Gateway.Timeout,
	})
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(c.Close))
	return c, nil
}

func newPipeline(plugins []steps.Plugin, cfg config.Config) (*steps.Pipeline, error) {
	configs := make([]steps.StepConfig, len(cfg.Pipeline.Steps))
	for i, s := range cfg.Pipeline.Steps {
		configs[i] = steps.StepConfig{Type: s.Type, Params: s.Params}
	}
	return steps.NewPipeline(plugins, configs, steps.Defaults{
		KVConnector:     cfg.Pipeline.KVConnector,
		ECConnector:     cfg.Pipeline.ECConnector,
		UseOpenAIFormat: cfg.Pipeline.UseOpenAIFormat,
	})
}

func newGRPCServer(svc *Coordinator, h *health.Server, cfg config.Config, log *slog.Logger) (*grpc.Server, error) {
	return NewGRPCServer(svc, h, cfg.Server.MaxRequestBodyBytes(), log)
}

// InProcess is an in-memory connection to the gRPC server: the REST front
// calls CoordinatorService through it, interceptors included, without a
// trip through the kernel.
type InProcess struct {
	listener *bufconn.Listener
	conn     *grpc.ClientConn
	// Client is the CoordinatorService client over the connection.
	Client coordinatorv1.CoordinatorServiceClient
}

func newInProcess(cfg config.Config) (*InProcess, error) {
	lis := bufconn.Listen(1 << 20)
	limit := int(cfg.Server.MaxRequestBodyBytes()) + messageSlack
	conn, err := grpc.NewClient("passthrough:///in-process",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20),
		grpc.WithInitialConnWindowSize(4<<20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)),
	)
	if err != nil {
		return nil, fmt.Errorf("in-process grpc client: %w", err)
	}
	return &InProcess{listener: lis, conn: conn, Client: coordinatorv1.NewCoordinatorServiceClient(conn)}, nil
}

// serveGRPC listens on server.grpc_listen_addr at start (a busy port fails
// startup) and serves there and in process; at stop it drains calls for up
// to server.shutdown_timeout, then closes what is left.
func serveGRPC(lc fx.Lifecycle, srv *grpc.Server, in *InProcess, cfg config.Config, ready *Readiness, addrs *Addresses, log *slog.Logger) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", cfg.Server.GRPCListenAddr)
			if err != nil {
				return fmt.Errorf("server.grpc_listen_addr: %w", err)
			}
			addrs.SetGRPC(lis.Addr().String())
			log.Info("grpc listening", "addr", lis.Addr().String())
			go serve(srv, lis, log)
			go serve(srv, in.listener, log)
			return nil
		},
		OnStop: func(context.Context) error {
			ready.Set(false)
			done := make(chan struct{})
			go func() { srv.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(cfg.Server.ShutdownTimeout):
				srv.Stop()
				<-done
			}
			return in.conn.Close()
		},
	})
}

func serve(srv *grpc.Server, lis net.Listener, log *slog.Logger) {
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		log.Error("grpc serve", "error", err)
	}
}
