package service

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/coordinator-project/coordinator/steps"
)

// The REST front parses each inference body once, to answer a malformed
// one with 400 and to see "stream". Its parse reaches the service in
// process instead of being done again: WithParsedBody puts the document in
// the call's context, and the Channel hands the request message over
// without copying it, so the service finds the very bytes the document was
// parsed from (steps.Document.Of) and takes the document as its own. A
// network gRPC call, or any copy on the way, is parsed by the service.

// parsedKey carries the document of the request a call sends.
type parsedKey struct{}

// handOverKey marks a call whose messages the Channel passes by reference.
type handOverKey struct{}

// WithParsedBody returns ctx carrying doc, the parsed body of the request
// about to be sent on ctx through the Channel, which then hands the
// request message over (see WithHandOver).
func WithParsedBody(ctx context.Context, doc *steps.Document) context.Context {
	return WithHandOver(context.WithValue(ctx, parsedKey{}, doc))
}

// WithHandOver returns ctx marking the calls made on it through the Channel
// as handing their messages over: the caller does not read or modify the
// request message once it is sent, nor the handler its reply once it
// returned it, so the Channel passes both by reference instead of copying
// them (a streamed call's responses are copied as always: their sender
// reuses them).
func WithHandOver(ctx context.Context) context.Context {
	return context.WithValue(ctx, handOverKey{}, true)
}

// handsOver reports whether ctx is marked by WithHandOver.
func handsOver(ctx context.Context) bool {
	v, _ := ctx.Value(handOverKey{}).(bool)
	return v
}

// parsedBody returns the document WithParsedBody put in ctx when it was
// parsed from these very bytes for format f, else nil.
func parsedBody(ctx context.Context, body []byte, f steps.Format) *steps.Document {
	doc, _ := ctx.Value(parsedKey{}).(*steps.Document)
	if doc == nil || !doc.Of(body) || doc.Format() != f {
		return nil
	}
	return doc
}

// handOver makes dst (a new message of src's type) hold src's fields by
// reference: bytes, strings and nested messages are shared, not copied.
func handOver(dst, src proto.Message) {
	d := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
}
