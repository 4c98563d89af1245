package service

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

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// Channel is an in-process gRPC client connection to one service: a call
// runs the server's interceptor chain and the method's handler directly,
// with metadata, headers, trailers, status codes, cancellation and the
// message size limit as over the network, but without HTTP/2 framing,
// serialisation or a hop between goroutines (a server stream runs its
// handler in one goroutine of its own). Messages are copied as they pass,
// as over the network, unless the call's context hands them over (see
// WithHandOver). The REST front reaches CoordinatorService through it.
// Safe for concurrent use.
type Channel struct {
	impl    any
	service string
	unary   map[string]grpc.MethodDesc
	streams map[string]grpc.StreamDesc
	chain   *Interceptors
	maxRecv int

	mu     sync.Mutex
	idle   []*runner // runners between two streams, at most maxIdleRunners
	closed bool
}

// maxIdleRunners bounds the runners a Channel keeps between streams: about
// the streams it serves at once under load; a stream past them starts a
// runner of its own, stopped when the stream ends.
const maxIdleRunners = 256

// NewChannel serves desc's methods from impl through chain. Requests
// larger than maxRecv bytes fail with ResourceExhausted, as the server's
// own limit would.
func NewChannel(desc *grpc.ServiceDesc, impl any, chain *Interceptors, maxRecv int) *Channel {
	c := &Channel{impl: impl, service: desc.ServiceName, chain: chain, maxRecv: maxRecv,
		unary: make(map[string]grpc.MethodDesc), streams: make(map[string]grpc.StreamDesc)}
	for _, m := range desc.Methods {
		c.unary["/"+desc.ServiceName+"/"+m.MethodName] = m
	}
	for _, s := range desc.Streams {
		c.streams["/"+desc.ServiceName+"/"+s.StreamName] = s
	}
	return c
}

// Invoke implements grpc.ClientConnInterface for unary methods.
func (c *Channel) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	desc, ok := c.unary[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	if !checkedByFront(ctx) {
		if err := c.checkSize(args); err != nil {
			return err
		}
	}
	sts := &transportStream{method: method}
	pass := proto.Merge
	if handsOver(ctx) {
		pass = handOver
	}
	ctx = grpc.NewContextWithServerTransportStream(serverContext(ctx), sts)
	dec := func(in any) error { pass(in.(proto.Message), args.(proto.Message)); return nil }
	resp, err := desc.Handler(c.impl, ctx, dec, c.chain.Unary)
	sts.deliver(opts)
	if err != nil {
		return toStatus(err)
	}
	pass(reply.(proto.Message), resp.(proto.Message))
	return nil
}

// NewStream implements grpc.ClientConnInterface for server-streaming
// methods. The handler does not start here but at the caller's first
// Header or RecvMsg, once the request was sent.
func (c *Channel) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	sd, ok := c.streams[method]
	if !ok || sd.ClientStreams {
		return nil, status.Errorf(codes.Unimplemented, "unknown or client-streaming method %s", method)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{
		transportStream: transportStream{method: method},
		clientCtx:       ctx,
		cancel:          cancel,
		channel:         c,
		opts:            opts,
		handOver:        handsOver(ctx),
		info:            grpc.StreamServerInfo{FullMethod: method, IsServerStream: sd.ServerStreams},
		handler:         sd.Handler,
	}
	s.serverCtx = grpc.NewContextWithServerTransportStream(serverContext(ctx), &s.transportStream)
	s.stopAfter = context.AfterFunc(ctx, s.abandon)
	return (*clientSide)(s), nil
}

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
var handlerEnd proto.Message = &coordinatorv1.GenerateStreamResponse{}

func newRunner() *runner {
	r := &runner{}
	r.next, r.stop = iter.Pull(func(yield func(proto.Message) bool) {
		for {
			s := r.s
			s.yield = yield
			s.finish(s.channel.chain.Stream(s.channel.impl, (*serverSide)(s), &s.info, s.handler))
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
	if c.closed || len(c.idle) >= maxIdleRunners {
		c.mu.Unlock()
		r.stop()
		return
	}
	c.idle = append(c.idle, r)
	c.mu.Unlock()
}

func (c *Channel) checkSize(m any) error {
	if n := proto.Size(m.(proto.Message)); n > c.maxRecv {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, c.maxRecv)
	}
	return nil
}

// serverContext turns the caller's outgoing metadata into the incoming
// metadata the handler sees, as the network would.
func serverContext(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = context.WithValue(ctx, inProcessKey{}, true)
	return metadata.NewOutgoingContext(metadata.NewIncomingContext(ctx, md), nil)
}

// toStatus gives a handler's plain error the code gRPC would give it:
// Canceled or DeadlineExceeded for context errors, Unknown otherwise.
func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.FromContextError(err).Err()
}

// transportStream collects what a handler sets with grpc.SetHeader,
// grpc.SendHeader and grpc.SetTrailer.
type transportStream struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
	// sent is a stream's header once the caller took it (sentHeader);
	// what is set after is not sent, as over gRPC.
	sent metadata.MD
}

func (t *transportStream) Method() string { return t.method }

// SetHeader adds md to the header. The transport takes md (the caller's
// fresh metadata.Pairs, as the service passes) instead of copying it.
func (t *transportStream) SetHeader(md metadata.MD) error {
	t.mu.Lock()
	t.header = merge(t.header, md)
	t.mu.Unlock()
	return nil
}

// merge adds md's values to dst, which it makes if nil, as metadata.Join
// would, without copying dst again at every call: a call sets its header
// in several steps.
func merge(dst, md metadata.MD) metadata.MD {
	if dst == nil {
		dst = make(metadata.MD, len(md))
	}
	for k, v := range md {
		dst[k] = append(dst[k], v...) // a copy: dst owns its slices
	}
	return dst
}

func (t *transportStream) SendHeader(md metadata.MD) error { return t.SetHeader(md) }

func (t *transportStream) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	t.trailer = merge(t.trailer, md)
	t.mu.Unlock()
	return nil
}

// sentHeader hands the header set so far to the caller, whose it is from
// then on: later SetHeaders go to a header nobody is sent.
func (t *transportStream) sentHeader() metadata.MD {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent == nil {
		t.sent, t.header = t.header, nil
		if t.sent == nil {
			t.sent = metadata.MD{}
		}
	}
	return t.sent
}

// deliver fills the grpc.Header and grpc.Trailer call options.
func (t *transportStream) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			if t.sent != nil {
				*o.HeaderAddr = t.sent.Copy()
			} else {
				*o.HeaderAddr = t.header.Copy()
			}
		case grpc.TrailerCallOption:
			*o.TrailerAddr = t.trailer.Copy()
		}
	}
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
	handOver             bool          // the request is passed by reference (WithHandOver)
	request              proto.Message // the one request, until the handler reads it
	info                 grpc.StreamServerInfo
	handler              grpc.StreamHandler

	// mu serialises resuming the handler: the caller's goroutine and, once
	// the context ends, abandon's.
	mu        sync.Mutex
	runner    *runner                  // while the handler runs
	yield     func(proto.Message) bool // the handler's side of the runner's next
	stopAfter func() bool              // unregisters abandon
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

// abandon runs the handler to its end once the call's context ended with
// the handler suspended in a send (the caller stopped receiving). A
// handler that never started does not.
func (s *stream) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		handOver(m.(proto.Message), req)
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
	if !s.started && !s.ended {
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
	if !checkedByFront(s.clientCtx) {
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
		copyMessage(m.(proto.Message), msg)
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
	s.stopAfter()
	s.cancel()
	s.result = io.EOF
	if s.err != nil {
		s.result = s.err
	}
	return s.result
}

// copyMessage copies src into dst, a new message of its type: an events
// chunk into one buffer, anything else with proto.Merge.
func copyMessage(dst, src proto.Message) {
	d, ok := dst.(*coordinatorv1.GenerateStreamResponse)
	events := src.(*coordinatorv1.GenerateStreamResponse).GetOpenai()
	if !ok || events == nil {
		proto.Merge(dst, src)
		return
	}
	size := 0
	for _, e := range events.GetData() {
		size += len(e)
	}
	buf := make([]byte, 0, size)
	data := make([][]byte, len(events.GetData()))
	for i, e := range events.GetData() {
		buf = append(buf, e...)
		data[i] = buf[len(buf)-len(e) : len(buf) : len(buf)]
	}
	d.Chunk = &coordinatorv1.GenerateStreamResponse_Openai{Openai: &coordinatorv1.OpenAIEvents{Data: data}}
}

var _ grpc.ClientConnInterface = (*Channel)(nil)
