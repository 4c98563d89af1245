package inproc

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// HandOver is the record of one call whose caller hands its messages over:
// the request reaches the handler, and the replies the caller, by
// reference (Options.Pass) and without the size check, because the caller
// built and bounded them itself. The caller keeps it, by value, in the
// record its context carries, and Options.HandOverOf finds it there.
type HandOver struct {
	stream *stream
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

// handOverOf is c's record of ctx's call, nil when its caller does not
// hand its messages over.
func (c *Channel) handOverOf(ctx context.Context) *HandOver {
	if c.opts.HandOverOf == nil {
		return nil
	}
	return c.opts.HandOverOf(ctx)
}

// pass moves src into dst for a handed-over call: by reference when
// Options.Pass knows the pair, else as a copy.
func (c *Channel) pass(dst, src proto.Message) {
	if c.opts.Pass == nil || !c.opts.Pass(dst, src) {
		proto.Merge(dst, src)
	}
}
