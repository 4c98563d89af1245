package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/frontdoor"
)

// errSlowReader is the cause of a stream's context when its client took
// no message for the stream write timeout.
var errSlowReader = errors.New("client stopped reading the stream")

// boundSends ends a network server stream whose client stops reading: a
// message gRPC's flow control does not let out within timeout cancels the
// call's context (so every leg of the request stops) and ends the call
// with DEADLINE_EXCEEDED. A send blocked on flow control only returns once
// the stream's transport context ends, which gRPC does when the handler
// returns; so the handler runs in a goroutine of its own and the call
// returns without it, and gRPC's end of the stream frees the blocked send.
// A call whose context ends otherwise (client gone, drain timed out) ends
// with its handler, which sees the cancellation (its log line and metrics
// come before the client's status, and the drain waits for them); it
// returns without it only once a send stays blocked past timeout. The
// in-process channel's streams are bounded by the REST front's own write
// deadline instead. 0 turns the bound off.
func boundSends(timeout time.Duration) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if timeout <= 0 || !info.IsServerStream || frontdoor.Of(ss.Context()) == frontdoor.REST {
			return handler(srv, ss)
		}
		return runBounded(srv, ss, handler, timeout)
	}
}

// runBounded runs handler on a goroutine of its own with its sends bounded
// by timeout (boundSends). (Apart from boundSends, whose frame every
// stream's goroutine holds, the in-process ones included.)
func runBounded(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, timeout time.Duration) error {
	bs := newBoundedStream(ss, timeout)
	defer bs.cancel(nil)
	done := make(chan error, 1) // the handler never waits to report
	go func() { done <- handler(srv, bs) }()
	select {
	case err := <-done:
		return err
	case <-bs.ctx.Done():
	}
	if errors.Is(context.Cause(bs.ctx), errSlowReader) {
		return status.Errorf(codes.DeadlineExceeded, "%v: no message taken for %s (server.stream_write_timeout)", errSlowReader, timeout)
	}
	select {
	case err := <-done:
		return err
	case <-bs.stuck:
		return status.FromContextError(bs.ctx.Err()).Err()
	}
}

// boundedStream times each SendMsg: the timer, armed for each send,
// cancels the context with errSlowReader and closes stuck when it runs
// out.
type boundedStream struct {
	grpc.ServerStream
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	timer   *time.Timer
	stuck   chan struct{}
}

func newBoundedStream(ss grpc.ServerStream, timeout time.Duration) *boundedStream {
	bs := &boundedStream{ServerStream: ss, timeout: timeout, stuck: make(chan struct{})}
	bs.ctx, bs.cancel = context.WithCancelCause(ss.Context())
	var once sync.Once
	bs.timer = time.AfterFunc(timeout, func() {
		bs.cancel(errSlowReader)
		once.Do(func() { close(bs.stuck) })
	})
	bs.timer.Stop()
	return bs
}

func (s *boundedStream) Context() context.Context { return s.ctx }

// SendMsg sends m, failing once the timer ran out.
func (s *boundedStream) SendMsg(m any) error {
	s.timer.Reset(s.timeout)
	err := s.ServerStream.SendMsg(m)
	if !s.timer.Stop() {
		return fmt.Errorf("send: %w", errSlowReader)
	}
	return err
}
