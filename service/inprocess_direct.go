package service

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ServeStream runs the server-streaming method on the calling goroutine:
// the interceptor chain and the handler run as for NewStream (metadata,
// headers, status, cancellation and the size limit alike), but each
// message the handler sends is handed to send as it is sent, with the
// header metadata as it stands, instead of crossing to another goroutine.
// A stream thus costs no goroutine and no copy of its messages: send must
// be done with msg when it returns (the handler reuses it). An error from
// send ends the call: the handler's Send fails with it and ctx is
// cancelled. ServeStream returns the header metadata once the handler
// returned, and its status; req is handed over as WithHandOver says when
// ctx is so marked, else copied.
func (c *Channel) ServeStream(ctx context.Context, method string, req proto.Message, send func(msg proto.Message, header metadata.MD) error) (metadata.MD, error) {
	sd, ok := c.streams[method]
	if !ok || sd.ClientStreams {
		return nil, status.Errorf(codes.Unimplemented, "unknown or client-streaming method %s", method)
	}
	if err := c.checkSize(req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &directStream{req: req, send: send, cancel: cancel, handOver: handsOver(ctx)}
	d.transportStream.method = method
	d.ctx = grpc.NewContextWithServerTransportStream(serverContext(ctx), &d.transportStream)
	info := &grpc.StreamServerInfo{FullMethod: method, IsServerStream: sd.ServerStreams}
	err := c.chain.Stream(c.impl, d, info, sd.Handler)
	d.mu.Lock()
	header := d.header.Copy()
	d.mu.Unlock()
	if err != nil {
		if d.sendErr != nil {
			return header, d.sendErr
		}
		return header, toStatus(err)
	}
	return header, nil
}

// directStream is the grpc.ServerStream of a ServeStream call.
type directStream struct {
	transportStream
	ctx      context.Context
	req      proto.Message // the request, until the handler received it
	send     func(proto.Message, metadata.MD) error
	cancel   context.CancelFunc
	handOver bool
	sendErr  error // send's error, which ended the call
}

func (d *directStream) Context() context.Context { return d.ctx }

func (d *directStream) SetHeader(md metadata.MD) error { return d.transportStream.SetHeader(md) }

func (d *directStream) SendHeader(md metadata.MD) error { return d.transportStream.SetHeader(md) }

func (d *directStream) SetTrailer(md metadata.MD) { _ = d.transportStream.SetTrailer(md) }

// SendMsg hands m to send.
func (d *directStream) SendMsg(m any) error {
	if d.sendErr != nil {
		return d.sendErr
	}
	if err := d.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	d.mu.Lock()
	header := d.header
	d.mu.Unlock()
	if err := d.send(m.(proto.Message), header); err != nil {
		d.sendErr = err
		d.cancel()
		return err
	}
	return nil
}

// RecvMsg gives the handler the request, then io.EOF.
func (d *directStream) RecvMsg(m any) error {
	if d.req == nil {
		return io.EOF
	}
	if d.handOver {
		handOver(m.(proto.Message), d.req)
	} else {
		proto.Merge(m.(proto.Message), d.req)
	}
	d.req = nil
	return nil
}

var _ grpc.ServerStream = (*directStream)(nil)
