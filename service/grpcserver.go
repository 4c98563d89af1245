package service

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"buf.build/go/protovalidate"
	grpcvalidate "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// messageSlack is room for the gRPC envelope around the largest body.
const messageSlack = 1 << 20

// Interceptors is the chain every CoordinatorService call runs through,
// over the network and in process alike: admission, the slow reader bound
// (network streams), logging, the declared body size, panic recovery, then
// the memory budget's account, protovalidate (but for the REST front's own
// requests: frontdoor.Checked).
type Interceptors struct {
	Unary  grpc.UnaryServerInterceptor
	Stream grpc.StreamServerInterceptor
}

// ChainOptions are the server-wide parts of the chain.
type ChainOptions struct {
	// Admission admits the inference calls first, so a refusal costs
	// nothing further; nil admits every call.
	Admission *admission.Controller
	// StreamWriteTimeout bounds each message of a network stream
	// (boundSends); 0: no bound.
	StreamWriteTimeout time.Duration
	// Budget is the memory budget each call opens an account of (but the
	// REST front's, which carry theirs); nil: none.
	Budget *membudget.Budget
	// MaxMessageBytes is the server's message limit: a call whose
	// content-length metadata declares more than one such message is
	// refused before it is read (DeclaredBodyTooLarge); 0: no check.
	MaxMessageBytes int
}

// NewInterceptors builds the chain.
func NewInterceptors(log *slog.Logger, opts ChainOptions) (*Interceptors, error) {
	// Compiling the rules up front keeps the first requests from paying
	// for it (hundreds of milliseconds).
	validator, err := protovalidate.New(protovalidate.WithMessages(
		&coordinatorv1.GenerateRequest{}, &coordinatorv1.GenerateStreamRequest{},
		&coordinatorv1.GetRequestRequest{}, &coordinatorv1.DeleteRequestRequest{},
		&coordinatorv1.CountTokensRequest{},
	))
	if err != nil {
		return nil, fmt.Errorf("protovalidate: %w", err)
	}
	calls := logging.NewCallLog(log)
	recoverOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	unary := []grpc.UnaryServerInterceptor{
		calls.Unary,
		recovery.UnaryServerInterceptor(recoverOpt),
		unlessCheckedUnary(grpcvalidate.UnaryServerInterceptor(validator)),
	}
	stream := []grpc.StreamServerInterceptor{
		boundSends(opts.StreamWriteTimeout),
		calls.Stream,
		recovery.StreamServerInterceptor(recoverOpt),
		unlessCheckedStream(grpcvalidate.StreamServerInterceptor(validator)),
	}
	if opts.MaxMessageBytes > 0 {
		limit := declaredLimit(opts.MaxMessageBytes)
		unary = slices.Insert(unary, 1, declaredSizeUnary(limit))
		stream = slices.Insert(stream, 2, declaredSizeStream(limit))
	}
	if opts.Budget != nil { // inside the logging, before recovery and protovalidate
		unary = slices.Insert(unary, len(unary)-2, budgetUnary(opts.Budget))
		stream = slices.Insert(stream, len(stream)-2, budgetStream(opts.Budget))
	}
	if opts.Admission != nil {
		unary = append([]grpc.UnaryServerInterceptor{opts.Admission.Unary}, unary...)
		stream = append([]grpc.StreamServerInterceptor{opts.Admission.Stream}, stream...)
	}
	return &Interceptors{Unary: chainUnary(unary...), Stream: chainStream(stream...)}, nil
}

// NewGRPCServer builds the gRPC server: the gRPC server metrics, then the
// interceptors, on unary and streaming calls; the CoordinatorService,
// grpc.health.v1 and server reflection. Messages may be as large as the
// configured body cap. opts come last (grpc.Creds for TLS).
func NewGRPCServer(svc *Coordinator, chain *Interceptors, healthSrv *health.Server, m *metrics.Metrics, maxBodyBytes int64, opts ...grpc.ServerOption) *grpc.Server {
	limit := int(maxBodyBytes) + messageSlack
	s := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(limit),
		grpc.MaxSendMsgSize(limit),
		grpc.InitialWindowSize(1 << 20),
		grpc.InitialConnWindowSize(4 << 20),
		grpc.ChainUnaryInterceptor(m.GRPC.UnaryServerInterceptor(), chain.Unary),
		grpc.ChainStreamInterceptor(m.GRPC.StreamServerInterceptor(), chain.Stream),
	}, opts...)...)
	coordinatorv1.RegisterCoordinatorServiceServer(s, svc)
	healthpb.RegisterHealthServer(s, healthSrv)
	reflection.Register(s)
	m.GRPC.InitializeMetrics(s)
	return s
}

// unlessCheckedUnary runs validate but on the requests the REST front
// built from a request it checked (frontdoor.Checked): protovalidate would
// find nothing there, at a cost of several microseconds a call.
func unlessCheckedUnary(validate grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if frontdoor.Checked(ctx) {
			return handler(ctx, req)
		}
		return validate(ctx, req, info, handler)
	}
}

// unlessCheckedStream is unlessCheckedUnary for streams.
func unlessCheckedStream(validate grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if frontdoor.Checked(ss.Context()) {
			return handler(srv, ss)
		}
		return validate(srv, ss, info, handler)
	}
}

// chainUnary runs interceptors outermost first, as grpc.ChainUnaryInterceptor.
// A method's chain is built at its first call and kept: a gRPC handler
// takes what varies per call as arguments, so the chain of one method and
// server is the same every call (grpc-go builds it anew each time, one
// closure an interceptor).
func chainUnary(interceptors ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	type key struct {
		method string
		server any
	}
	var built sync.Map // key → grpc.UnaryHandler
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		k := key{info.FullMethod, info.Server}
		if next, ok := built.Load(k); ok {
			return next.(grpc.UnaryHandler)(ctx, req)
		}
		next := handler
		for i := len(interceptors) - 1; i >= 0; i-- {
			icpt, inner := interceptors[i], next
			next = func(ctx context.Context, req any) (any, error) { return icpt(ctx, req, info, inner) }
		}
		built.Store(k, next)
		return next(ctx, req)
	}
}

// chainStream runs interceptors outermost first, as
// grpc.ChainStreamInterceptor, with each method's chain kept as
// chainUnary's (a stream handler takes its server as an argument).
func chainStream(interceptors ...grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	var built sync.Map // method → grpc.StreamHandler
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if next, ok := built.Load(info.FullMethod); ok {
			return next.(grpc.StreamHandler)(srv, ss)
		}
		next := handler
		for i := len(interceptors) - 1; i >= 0; i-- {
			icpt, inner := interceptors[i], next
			next = func(srv any, ss grpc.ServerStream) error { return icpt(srv, ss, info, inner) }
		}
		built.Store(info.FullMethod, next)
		return next(srv, ss)
	}
}
