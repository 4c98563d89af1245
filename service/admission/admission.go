package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/service/config"
)

// ErrShuttingDown is the cause of the context of a call still in flight
// when the drain's server.shutdown_timeout ran out: the call ends with
// UNAVAILABLE "server shutting down" (REST 503, or a final SSE error event
// once the stream started).
var ErrShuttingDown = errors.New("server shutting down")

// StopGrace is how long each step of a stop past the drain waits before
// it forces its end: the calls the drain cancelled, then each listener's
// close.
const StopGrace = 3 * time.Second

// headerRetryPushback is gRPC's retry pushback trailer (gRFC A6): a client
// with a retry policy waits this many milliseconds before it retries.
const headerRetryPushback = "grpc-retry-pushback-ms"

// Controller bounds the inference calls in flight (Generate and
// GenerateStream, over the network and from the REST front alike) and
// drains them at shutdown. Past server.max_concurrent_requests, or
// server.max_concurrent_streams for streams, a call is refused with
// RESOURCE_EXHAUSTED (REST 429); once the drain began, with UNAVAILABLE
// (REST 503); both carry a google.rpc.RetryInfo of server.retry_after
// (REST Retry-After). Admitting costs two atomic additions. Safe for
// concurrent use.
type Controller struct {
	maxRequests, maxStreams int64
	requests, streams       atomic.Int64
	drainTimeout            time.Duration
	log                     *slog.Logger

	// draining refuses new calls; idle is closed once, when nothing is in
	// flight any more while draining.
	draining atomic.Bool
	idleOnce sync.Once
	idle     chan struct{}
	// stopped is cancelled with ErrShuttingDown when the drain times out:
	// every context AdmitContext gave out ends with it.
	stopped context.Context
	stop    context.CancelCauseFunc

	tooManyRequests, tooManyStreams, shuttingDown *status.Status
	rejectedRequests, rejectedStreams             prometheus.Counter
	rejectedShuttingDown                          prometheus.Counter
	releaseRequest, releaseStream                 func()
	pushback                                      metadata.MD
	shutdownCut                                   func(api string, stream bool)
	// hold keeps new calls at the door while the fleet is paused.
	hold *Hold
}

// Counters are where admission counts its refusals and the calls its drain
// cut short (the service gives them from service/metrics).
type Counters struct {
	RejectedRequests, RejectedStreams, RejectedShuttingDown prometheus.Counter
	// ShutdownCut counts a call cut short, by its front door's label
	// (frontdoor.Door.String) and whether it was a stream.
	ShutdownCut func(api string, stream bool)
	// HoldOutcome counts a call held during a pause by its outcome
	// (HoldServed, ...); nil: not counted.
	HoldOutcome func(outcome string)
}

// New builds the admission control of cfg's limits (0: no limit),
// retry_after and shutdown_timeout, counting in c.
func New(cfg config.Config, c Counters, log *slog.Logger) *Controller {
	s := cfg.Server
	a := &Controller{
		maxRequests:          int64(s.MaxConcurrentRequests),
		maxStreams:           int64(s.MaxConcurrentStreams),
		drainTimeout:         s.ShutdownTimeout,
		log:                  log,
		idle:                 make(chan struct{}),
		rejectedRequests:     c.RejectedRequests,
		rejectedStreams:      c.RejectedStreams,
		rejectedShuttingDown: c.RejectedShuttingDown,
		pushback:             metadata.Pairs(headerRetryPushback, strconv.FormatInt(s.RetryAfter.Milliseconds(), 10)),
		shutdownCut:          c.ShutdownCut,
	}
	a.stopped, a.stop = context.WithCancelCause(context.Background())
	retry := &errdetails.RetryInfo{RetryDelay: durationpb.New(s.RetryAfter)}
	a.tooManyRequests = withRetryInfo(codes.ResourceExhausted,
		fmt.Sprintf("too many requests in flight (server.max_concurrent_requests %d), retry later", s.MaxConcurrentRequests), retry)
	a.tooManyStreams = withRetryInfo(codes.ResourceExhausted,
		fmt.Sprintf("too many streams in flight (server.max_concurrent_streams %d), retry later", s.MaxConcurrentStreams), retry)
	a.shuttingDown = withRetryInfo(codes.Unavailable, ErrShuttingDown.Error(), retry)
	a.hold = NewHold(cfg, c.HoldOutcome)
	a.releaseRequest = func() { a.release(false) }
	a.releaseStream = func() { a.release(true) }
	return a
}

func withRetryInfo(code codes.Code, msg string, retry *errdetails.RetryInfo) *status.Status {
	st, err := status.New(code, msg).WithDetails(retry)
	if err != nil {
		panic(err) // RetryInfo always marshals
	}
	return st
}

// Admit takes a place for one call (a stream when stream is true), or
// returns the refusal: a gRPC status error RESOURCE_EXHAUSTED past a
// limit, UNAVAILABLE while draining, each with a RetryInfo detail.
// release must be called exactly once, when the call ends. A call admitted
// this way is waited for by the drain but not cancelled at its end:
// AdmitContext is for calls that can be.
func (a *Controller) Admit(stream bool) (release func(), err error) {
	if err := a.take(stream); err != nil {
		return nil, err
	}
	if stream {
		return a.releaseStream, nil
	}
	return a.releaseRequest, nil
}

// AdmitContext is Admit for a call that runs under ctx, which first waits
// at the Hold while the fleet is paused: the returned context also ends,
// with cause ErrShuttingDown, when the drain times out. release must be
// called exactly once, when the call ends.
func (a *Controller) AdmitContext(ctx context.Context, stream bool) (context.Context, func(), error) {
	if err := a.hold.Wait(ctx, a.shuttingDown.Err()); err != nil {
		return ctx, nil, err
	}
	if err := a.take(stream); err != nil {
		return ctx, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(a.stopped, func() { cancel(ErrShuttingDown) })
	return ctx, func() {
		unhook()
		cancel(nil)
		a.release(stream)
	}, nil
}

// take counts the call in, then checks: a drain that began before the
// count is seen here, and the drain sees the count otherwise.
func (a *Controller) take(stream bool) error {
	n := a.requests.Add(1)
	switch {
	case a.draining.Load():
		a.requests.Add(-1)
		a.signalIdle()
		a.rejectedShuttingDown.Inc()
		return a.shuttingDown.Err()
	case a.maxRequests > 0 && n > a.maxRequests:
		a.release(false)
		a.rejectedRequests.Inc()
		return a.tooManyRequests.Err()
	}
	if !stream {
		return nil
	}
	if n := a.streams.Add(1); a.maxStreams > 0 && n > a.maxStreams {
		a.release(true)
		a.rejectedStreams.Inc()
		return a.tooManyStreams.Err()
	}
	return nil
}

func (a *Controller) release(stream bool) {
	if stream {
		a.streams.Add(-1)
	}
	if a.requests.Add(-1) == 0 && a.draining.Load() {
		a.signalIdle()
	}
}

func (a *Controller) signalIdle() {
	if a.requests.Load() == 0 {
		a.idleOnce.Do(func() { close(a.idle) })
	}
}

// Hold is the hold of new calls during a pause made through the control
// plane.
func (a *Controller) Hold() *Hold { return a.hold }

// AwaitResume waits, as a new call would, until the fleet paused through
// the control plane resumes (at once when it is not paused); its errors
// are the Hold's.
func (a *Controller) AwaitResume(ctx context.Context) error {
	return a.hold.Wait(ctx, a.shuttingDown.Err())
}

// InFlight reports the calls admitted and not yet released, and the
// streams among them.
func (a *Controller) InFlight() (requests, streams int) {
	return int(a.requests.Load()), int(a.streams.Load())
}

// Drain refuses every new call from now on, waits for the calls in flight
// to end for up to server.shutdown_timeout, then cancels those left (their
// contexts end with ErrShuttingDown) and waits up to StopGrace for them to
// end. Each wait also ends with ctx. It returns an error if calls were
// still in flight at the end. Call it once.
func (a *Controller) Drain(ctx context.Context) error {
	a.draining.Store(true)
	a.hold.shutDown()
	a.signalIdle()
	if n, _ := a.InFlight(); n > 0 {
		a.log.Info("draining", "in_flight", n, "timeout", a.drainTimeout)
	}
	timer := time.NewTimer(a.drainTimeout)
	defer timer.Stop()
	select {
	case <-a.idle:
		return nil
	case <-ctx.Done():
	case <-timer.C:
	}
	n, _ := a.InFlight()
	a.log.Warn("drain timed out, ending the calls left", "in_flight", n)
	a.stop(ErrShuttingDown)
	timer.Reset(StopGrace)
	select {
	case <-a.idle:
		return nil
	case <-ctx.Done():
	case <-timer.C:
	}
	n, _ = a.InFlight()
	return fmt.Errorf("drain: %d calls still in flight after their cancellation", n)
}

// admits reports the methods the Controller bounds: inference and token
// counts (a render call each), not the queued
// requests' lookups, health or reflection.
func admits(method string) (ok, stream bool) {
	switch method {
	case coordinatorv1.CoordinatorService_Generate_FullMethodName, coordinatorv1.CoordinatorService_CountTokens_FullMethodName:
		return true, false
	case coordinatorv1.CoordinatorService_GenerateStream_FullMethodName:
		return true, true
	}
	return false, false
}

// Unary is the unary interceptor: it admits Generate calls and gives a
// call the drain cut short its UNAVAILABLE status.
func (a *Controller) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ok, stream := admits(info.FullMethod)
	if !ok {
		return handler(ctx, req)
	}
	ctx, release, err := a.AdmitContext(ctx, stream)
	if err != nil {
		_ = grpc.SetTrailer(ctx, a.pushback)
		return nil, err
	}
	defer release()
	resp, err := handler(ctx, req)
	return resp, a.cutShort(ctx, err, stream)
}

// Stream is the stream interceptor: Unary for GenerateStream.
func (a *Controller) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ok, stream := admits(info.FullMethod)
	if !ok {
		return handler(srv, ss)
	}
	ctx, release, err := a.AdmitContext(ss.Context(), stream)
	if err != nil {
		ss.SetTrailer(a.pushback)
		return err
	}
	defer release()
	return a.cutShort(ctx, handler(srv, &contextStream{ServerStream: ss, ctx: ctx}), stream)
}

// cutShort turns the failure of a call the drain cancelled into its
// UNAVAILABLE status, and counts it (coordinator_shutdown_cut_total).
func (a *Controller) cutShort(ctx context.Context, err error, stream bool) error {
	if err == nil || !CutByShutdown(ctx) {
		return err
	}
	a.shutdownCut(frontdoor.Of(ctx).String(), stream)
	return a.shuttingDown.Err()
}

// CutByShutdown reports whether ctx, a context AdmitContext gave out (or
// one derived from it), was ended by the drain at server.shutdown_timeout.
func CutByShutdown(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrShuttingDown)
}

// contextStream is a server stream with a context of its own.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
