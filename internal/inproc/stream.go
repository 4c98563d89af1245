package inproc

import (
	"context"
	"io"
	"iter"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The Channel's server streams: the runners that run their handlers, and
// the stream as the handler and the caller see it.

// Close stops the runners kept between streams. Streams still running end
// as they would; their runners stop when they do.
func (c *Channel) Close() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, r := range idle {
		r.stop()
	}
}

// IdleRunners is the number of runners kept for the next streams: each is
// a goroutine, parked.
func (c *Channel) IdleRunners() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.idle)
}

// runner is a coroutine (iter.Pull) that runs stream handlers one after
// another. A handler's stack is deep (the interceptors, the pipeline, the
// HTTP client of the legs): on a new goroutine it grows by copying several
// times a call, about a tenth of the CPU of a streamed request, where a
// runner's has grown already.
type runner struct {
	next func() (proto.Message, bool)
	stop func()
	s    *stream // the stream it serves
}

// handlerEnd is what a runner yields when its stream's handler returned.
var handlerEnd proto.Message = new(emptypb.Empty)

func newRunner() *runner {
	r := &runner{}
	r.next, r.stop = iter.Pull(func(yield func(proto.Message) bool) {
		for {
			s := r.s
			s.yield = yield
			s.finish(s.channel.opts.Stream(s.channel.impl, (*serverSide)(s), &s.info, s.handler))
			r.s = nil
			if !yield(handlerEnd) {
				return
			}
		}
	})
	return r
}

// takeRunner is an idle runner, or a new one.
func (c *Channel) takeRunner() *runner {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.idle); n > 0 {
		r := c.idle[n-1]
		c.idle = c.idle[:n-1]
		return r
	}
	return newRunner()
}

// putRunner keeps r for the next stream, or stops it when the Channel has
// enough idle runners or is closed.
func (c *Channel) putRunner(r *runner) {
	c.mu.Lock()
	if c.closed || len(c.idle) >= c.maxIdle {
		c.mu.Unlock()
		r.stop()
		return
	}
	c.idle = append(c.idle, r)
	c.mu.Unlock()
}

// stream is one in-process server-streaming call. The handler runs on a
// runner, a coroutine of the caller: the caller's Header and RecvMsg
// resume it until it sends its header or a message, or ends, so each
// message passes from the handler's SendMsg to the caller's RecvMsg by a
// direct switch, without a channel, a handshake or the scheduler waking a
// goroutine. The handler must send from the goroutine it was called on (as
// the service does; gRPC would let any one goroutine send). A caller that
// stops receiving before the end cancels its context, as over gRPC: the
// handler then runs to its end, each send failing.
type stream struct {
	transportStream
	clientCtx, serverCtx context.Context
	cancel               context.CancelFunc
	channel              *Channel
	opts                 []grpc.CallOption
	handOver             bool          // messages are passed by reference (HandOver)
	request              proto.Message // the one request, until the handler reads it
	info                 grpc.StreamServerInfo
	handler              grpc.StreamHandler

	// mu serialises resuming the handler: the caller's goroutine and
	// abandon's (once the context ends, or HandOver.End).
	mu        sync.Mutex
	runner    *runner                  // while the handler runs
	yield     func(proto.Message) bool // the handler's side of the runner's next
	stopAfter func() bool              // unregisters abandon; nil for a handed-over call (HandOver.End)
	started   bool
	ended     bool          // the handler returned
	err       error         // the handler's status, once ended
	pending   proto.Message // a message sent while Header waited for the header
	result    error         // what RecvMsg returned at the end, returned again
}

// resume runs the handler to its next message (nil: its header alone) or
// its end, when its runner goes back to the Channel; mu is held.
func (s *stream) resume() (proto.Message, bool) {
	if !s.started {
		s.started = true
		s.runner = s.channel.takeRunner()
		s.runner.s = s
	}
	if s.runner == nil {
		return nil, false
	}
	msg, ok := s.runner.next()
	if ok && msg != handlerEnd {
		return msg, true
	}
	if ok {
		s.channel.putRunner(s.runner)
	}
	s.runner = nil
	return nil, false
}

func (s *stream) finish(err error) {
	if err != nil {
		s.err = toStatus(err)
	}
	s.ended = true
}

// abandon ends the call of a caller that stopped receiving: once its
// context ended (AfterFunc), or when a handed-over call's caller is done with the
// stream (HandOver.End). The handler, suspended in a send, runs to its end
// with its sends failing; one that never started does not start.
func (s *stream) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel()
	if !s.started {
		s.started, s.ended = true, true
		s.err = status.FromContextError(s.clientCtx.Err()).Err()
		return
	}
	for s.runner != nil {
		s.resume()
	}
}

// serverSide is the grpc.ServerStream the handler uses.
type serverSide stream

func (s *serverSide) Context() context.Context { return s.serverCtx }

func (s *serverSide) SetHeader(md metadata.MD) error { return s.transportStream.SetHeader(md) }

// SendHeader sets md and hands the header to a caller waiting in Header.
func (s *serverSide) SendHeader(md metadata.MD) error {
	_ = s.transportStream.SetHeader(md)
	if !s.yield(nil) {
		return status.Error(codes.Canceled, "the call was canceled")
	}
	return nil
}

func (s *serverSide) SetTrailer(md metadata.MD) { _ = s.transportStream.SetTrailer(md) }

// SendMsg hands m to the caller's RecvMsg and returns when the caller
// asks for the next one: the caller has copied m by then.
func (s *serverSide) SendMsg(m any) error {
	if err := s.serverCtx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if !s.yield(m.(proto.Message)) {
		return status.Error(codes.Canceled, "the call was canceled")
	}
	return nil
}

// RecvMsg gives the handler the request the caller sent, then io.EOF.
func (s *serverSide) RecvMsg(m any) error {
	req := s.request
	if req == nil {
		return io.EOF
	}
	s.request = nil
	if s.handOver {
		s.channel.pass(m.(proto.Message), req)
	} else {
		proto.Merge(m.(proto.Message), req)
	}
	return nil
}

// clientSide is the grpc.ClientStream the caller uses.
type clientSide stream

func (s *clientSide) Context() context.Context { return s.clientCtx }

// Header runs the handler until it sent its header (with its first message
// or SendHeader) or ended.
func (s *clientSide) Header() (metadata.MD, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		if err := s.clientCtx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		if msg, ok := (*stream)(s).resume(); ok {
			s.pending = msg
		}
	}
	return s.transportStream.sentHeader(), nil
}

func (s *clientSide) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		return nil
	}
	s.transportStream.mu.Lock()
	defer s.transportStream.mu.Unlock()
	return s.trailer.Copy()
}

// SendMsg keeps the one request message of a server stream for the
// handler: by reference when the call hands its messages over, else a copy.
func (s *clientSide) SendMsg(m any) error {
	if !s.handOver {
		if err := s.channel.checkSize(m); err != nil {
			s.cancel()
			return err
		}
	}
	if s.handOver {
		s.request = m.(proto.Message)
	} else {
		s.request = proto.Clone(m.(proto.Message))
	}
	return nil
}

func (s *clientSide) CloseSend() error { return nil }

// RecvMsg runs the handler to its next message and copies it into m, or
// returns io.EOF after a clean end, or the handler's status.
func (s *clientSide) RecvMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		msg := s.pending
		s.pending = nil
		if msg == nil {
			if s.ended || s.result != nil {
				return (*stream)(s).end()
			}
			var ok bool
			if msg, ok = (*stream)(s).resume(); !ok {
				return (*stream)(s).end()
			}
			if msg == nil {
				continue // the header alone
			}
		}
		if s.handOver {
			s.channel.pass(m.(proto.Message), msg) // the caller's until its next RecvMsg
		} else {
			proto.Merge(m.(proto.Message), msg)
		}
		return nil
	}
}

// end is RecvMsg's answer once the handler ended: the caller's own
// cancellation, the handler's status or io.EOF; the call options get the
// header and trailer.
func (s *stream) end() error {
	if s.result != nil {
		return s.result
	}
	if err := s.clientCtx.Err(); err != nil {
		s.result = status.FromContextError(err).Err()
		return s.result
	}
	s.transportStream.deliver(s.opts)
	if s.stopAfter != nil {
		s.stopAfter()
	}
	s.cancel()
	s.result = io.EOF
	if s.err != nil {
		s.result = s.err
	}
	return s.result
}
