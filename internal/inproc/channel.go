package inproc

import (
	"context"
	"runtime"
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
// handler on a runner, a coroutine the caller drives). Messages are copied
// as they pass, as over the network, but for the calls whose caller hands
// them over (HandOver), which skip the size check too. Close it to stop
// its idle runners. Safe for concurrent use.
type Channel struct {
	impl    any
	service string
	unary   map[string]grpc.MethodDesc
	streams map[string]grpc.StreamDesc
	opts    Options

	mu      sync.Mutex
	idle    []*runner // runners between two streams, at most maxIdle
	maxIdle int
	closed  bool
}

// idleRunnersPerCPU bounds the runners a Channel keeps between streams.
// Under a steady load few are idle at once (a stream's end and the next
// one's start are close); past the bound, a stream that ends stops its
// runner. A small bound also keeps what a process at rest holds the same
// after any burst: the bound, once that many streams ran at once.
const idleRunnersPerCPU = 8

// Options configure a Channel.
type Options struct {
	// Unary and Stream are the server's interceptor chain, which every
	// call runs as a network call would.
	Unary  grpc.UnaryServerInterceptor
	Stream grpc.StreamServerInterceptor
	// MaxRecv bounds a request in bytes: a larger one fails with
	// ResourceExhausted, as the server's own limit would.
	MaxRecv int
	// Pass moves src into dst, a message of the same type, by reference,
	// for a handed-over call; it returns false for a type it does not
	// know, which is then copied (proto.Merge). Optional.
	Pass func(dst, src proto.Message) bool
}

// NewChannel serves desc's methods from impl as opts say.
func NewChannel(desc *grpc.ServiceDesc, impl any, opts Options) *Channel {
	c := &Channel{impl: impl, service: desc.ServiceName, opts: opts,
		unary: make(map[string]grpc.MethodDesc), streams: make(map[string]grpc.StreamDesc),
		maxIdle: idleRunnersPerCPU * runtime.GOMAXPROCS(0)}
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
	pass := proto.Merge
	if handOverOf(ctx) != nil {
		pass = c.pass
	} else if err := c.checkSize(args); err != nil {
		return err
	}
	sts := &transportStream{method: method}
	ctx = grpc.NewContextWithServerTransportStream(serverContext(ctx), sts)
	dec := func(in any) error { pass(in.(proto.Message), args.(proto.Message)); return nil }
	resp, err := desc.Handler(c.impl, ctx, dec, c.opts.Unary)
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
		info:            grpc.StreamServerInfo{FullMethod: method, IsServerStream: sd.ServerStreams},
		handler:         sd.Handler,
	}
	s.serverCtx = grpc.NewContextWithServerTransportStream(serverContext(ctx), &s.transportStream)
	if h := handOverOf(ctx); h != nil {
		s.handOver, h.stream = true, s // HandOver.End ends it
	} else {
		s.stopAfter = context.AfterFunc(ctx, s.abandon)
	}
	return (*clientSide)(s), nil
}

func (c *Channel) checkSize(m any) error {
	if n := proto.Size(m.(proto.Message)); n > c.opts.MaxRecv {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, c.opts.MaxRecv)
	}
	return nil
}

// serverContext turns the caller's outgoing metadata into the incoming
// metadata the handler sees, as the network would.
func serverContext(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
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
	// delivered: the handler returned and the caller holds its header and
	// trailer (deliver); what is set after is dropped.
	delivered bool
}

func (t *transportStream) Method() string { return t.method }

// SetHeader adds md to the header. The transport takes md (the caller's
// fresh metadata.Pairs, as the service passes) instead of copying it.
func (t *transportStream) SetHeader(md metadata.MD) error {
	t.mu.Lock()
	if !t.delivered {
		t.header = merge(t.header, md)
	}
	t.mu.Unlock()
	return nil
}

// merge adds md's values to dst, which it makes if nil, as metadata.Join
// would, without copying dst again at every call: a call sets its header
// in several steps. A key new to dst takes md's values by reference, with
// no room to grow: a later value for the key is appended to a copy, never
// written into md's array, so md (a shared one, as admission's pushback
// trailer) is never changed. The callers do not change md afterwards.
func merge(dst, md metadata.MD) metadata.MD {
	if dst == nil {
		dst = make(metadata.MD, len(md))
	}
	for k, v := range md {
		if old, ok := dst[k]; ok {
			dst[k] = append(old, v...)
		} else {
			dst[k] = v[:len(v):len(v)]
		}
	}
	return dst
}

func (t *transportStream) SendHeader(md metadata.MD) error { return t.SetHeader(md) }

func (t *transportStream) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	if !t.delivered {
		t.trailer = merge(t.trailer, md)
	}
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

// deliver fills the grpc.Header and grpc.Trailer call options once the
// handler returned. It hands over the header and trailer themselves, not
// copies: they are final, since what is set from then on is dropped.
func (t *transportStream) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delivered = true
	header := t.header
	if t.sent != nil {
		header = t.sent
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = t.trailer
		}
	}
}

var _ grpc.ClientConnInterface = (*Channel)(nil)
