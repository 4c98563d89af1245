package inproc

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// HandOver is the record of one call whose caller hands its messages over:
// the request reaches the handler, and the replies the caller, by
// reference (Options.Pass) and without the size check, because the caller
// built and bounded them itself. The caller puts it on the call's context
// (WithHandOver), and may keep it by value in a record of its own.
type HandOver struct {
	stream *stream
}

type handOverKey struct{}

// WithHandOver returns ctx for a call whose messages its caller hands over
// through h.
func WithHandOver(ctx context.Context, h *HandOver) context.Context {
	return context.WithValue(ctx, handOverKey{}, h)
}

// End abandons the call's stream once the caller is done with it (it
// stopped receiving, or the answer ended): the handler, suspended in a
// send, runs to its end with its sends failing. A handed-over stream does
// not watch its context (no AfterFunc), so a caller that stops receiving
// before the end must call End.
func (h *HandOver) End() {
	if h != nil && h.stream != nil {
		h.stream.abandon()
	}
}

// handOverOf is the record of ctx's call, nil when its caller does not
// hand its messages over.
func handOverOf(ctx context.Context) *HandOver {
	h, _ := ctx.Value(handOverKey{}).(*HandOver)
	return h
}

// pass moves src into dst for a handed-over call: by reference when
// Options.Pass knows the pair, else as a copy.
func (c *Channel) pass(dst, src proto.Message) {
	if c.opts.Pass == nil || !c.opts.Pass(dst, src) {
		proto.Merge(dst, src)
	}
}
