package service

import (
	"context"
	"io"

	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
}

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
	if err := c.checkSize(args); err != nil {
		return err
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

// NewStream implements grpc.ClientConnInterface for server-streaming methods.
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
		request:         make(chan proto.Message),
		messages:        make(chan proto.Message),
		taken:           make(chan struct{}, 1),
		headerSent:      make(chan struct{}),
		done:            make(chan struct{}),
		channel:         c,
		opts:            opts,
		handOver:        handsOver(ctx),
	}
	s.serverCtx = grpc.NewContextWithServerTransportStream(serverContext(ctx), &s.transportStream)
	info := &grpc.StreamServerInfo{FullMethod: method, IsServerStream: sd.ServerStreams}
	go func() {
		err := c.chain.Stream(c.impl, (*serverSide)(s), info, sd.Handler)
		s.finish(err)
	}()
	return (*clientSide)(s), nil
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

// deliver fills the grpc.Header and grpc.Trailer call options.
func (t *transportStream) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = t.header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = t.trailer.Copy()
		}
	}
}

// stream is one in-process server-streaming call. The handler goroutine
// sees it as serverSide, the caller as clientSide.
type stream struct {
	transportStream
	clientCtx, serverCtx context.Context
	cancel               context.CancelFunc
	// request and messages hand a message over; the receiver copies it
	// and then signals taken, so the sender may reuse it once SendMsg
	// returns, without a copy of its own.
	request, messages chan proto.Message
	taken             chan struct{}
	headerOnce        sync.Once
	headerSent        chan struct{}
	done              chan struct{}
	err               error // the handler's status; read after done
	channel           *Channel
	opts              []grpc.CallOption
	handOver          bool // the request is passed by reference (WithHandOver)
}

func (s *stream) sendHeader() { s.headerOnce.Do(func() { close(s.headerSent) }) }

func (s *stream) finish(err error) {
	if err != nil {
		s.err = toStatus(err)
	}
	s.sendHeader()
	close(s.done)
}

// serverSide is the grpc.ServerStream the handler uses.
type serverSide stream

func (s *serverSide) Context() context.Context { return s.serverCtx }

func (s *serverSide) SetHeader(md metadata.MD) error { return s.transportStream.SetHeader(md) }

func (s *serverSide) SendHeader(md metadata.MD) error {
	_ = s.transportStream.SetHeader(md)
	(*stream)(s).sendHeader()
	return nil
}

func (s *serverSide) SetTrailer(md metadata.MD) { _ = s.transportStream.SetTrailer(md) }

// SendMsg hands m to the caller and returns once the caller has copied it.
func (s *serverSide) SendMsg(m any) error {
	(*stream)(s).sendHeader()
	select {
	case s.messages <- m.(proto.Message):
		<-s.taken
		return nil
	case <-s.serverCtx.Done():
		return status.FromContextError(s.serverCtx.Err()).Err()
	}
}

func (s *serverSide) RecvMsg(m any) error {
	select {
	case req, ok := <-s.request:
		if !ok {
			return io.EOF
		}
		if s.handOver {
			handOver(m.(proto.Message), req)
		} else {
			proto.Merge(m.(proto.Message), req)
		}
		s.taken <- struct{}{}
		return nil
	case <-s.serverCtx.Done():
		return status.FromContextError(s.serverCtx.Err()).Err()
	}
}

// clientSide is the grpc.ClientStream the caller uses.
type clientSide stream

func (s *clientSide) Context() context.Context { return s.clientCtx }

func (s *clientSide) Header() (metadata.MD, error) {
	select {
	case <-s.headerSent:
	case <-s.clientCtx.Done():
		return nil, status.FromContextError(s.clientCtx.Err()).Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header.Copy(), nil
}

func (s *clientSide) Trailer() metadata.MD {
	select {
	case <-s.done:
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trailer.Copy()
}

// SendMsg hands the one request message of a server stream to the
// handler and returns once the handler has copied it.
func (s *clientSide) SendMsg(m any) error {
	if err := s.channel.checkSize(m); err != nil {
		s.cancel()
		return err
	}
	select {
	case s.request <- m.(proto.Message):
		<-s.taken
		return nil
	case <-s.done: // the handler ended without reading it
		return nil
	case <-s.clientCtx.Done():
		return status.FromContextError(s.clientCtx.Err()).Err()
	}
}

func (s *clientSide) CloseSend() error {
	close(s.request)
	return nil
}

// RecvMsg returns the next message, io.EOF after a clean end, or the
// handler's status.
func (s *clientSide) RecvMsg(m any) error {
	select {
	case msg := <-s.messages:
		proto.Merge(m.(proto.Message), msg)
		s.taken <- struct{}{}
		return nil
	case <-s.done: // every message was taken: the handover waits for it
		if err := s.clientCtx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		s.transportStream.deliver(s.opts)
		s.cancel()
		if s.err != nil {
			return s.err
		}
		return io.EOF
	case <-s.clientCtx.Done():
		return status.FromContextError(s.clientCtx.Err()).Err()
	}
}

var _ grpc.ClientConnInterface = (*Channel)(nil)
