package service

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/steps"
)

// The REST front parses each inference body once, to answer a malformed
// one with 400 and to see "stream". Its parse reaches the service in
// process instead of being done again: WithParsedBody puts the document in
// the call's context, and the Channel hands the request message over
// without copying it, so the service finds the very bytes the document was
// parsed from (steps.Document.Of) and takes the document as its own. A
// network gRPC call, or any copy on the way, is parsed by the service.

// handOverKey carries a call's hand-over mark and, when the REST front
// parsed the request's body, its document.
type handOverKey struct{}

// handOverValue is what handOverKey carries.
type handOverValue struct{ doc *steps.Document }

// WithParsedBody returns ctx carrying doc, the parsed body of the request
// about to be sent on ctx through the Channel, which then hands the
// request message over (see WithHandOver).
func WithParsedBody(ctx context.Context, doc *steps.Document) context.Context {
	return context.WithValue(ctx, handOverKey{}, handOverValue{doc: doc})
}

// WithHandOver returns ctx marking the calls made on it through the Channel
// as handing their messages over: the caller does not read or modify the
// request message once it is sent, nor the handler its reply once it
// returned it, so the Channel passes both by reference instead of copying
// them (a streamed call's responses are copied as always: their sender
// reuses them).
func WithHandOver(ctx context.Context) context.Context {
	return context.WithValue(ctx, handOverKey{}, handOverValue{})
}

// handsOver reports whether ctx is marked by WithHandOver or WithParsedBody.
func handsOver(ctx context.Context) bool {
	_, ok := ctx.Value(handOverKey{}).(handOverValue)
	return ok
}

// checkedByFront reports whether the call is the REST front's, made
// through the Channel with the document of the body it parsed
// (WithParsedBody; a network call's context never carries it). Such a
// request meets every protovalidate rule by construction: its request id
// passed requestid.OrNew (the rule's length and alphabet), its endpoint is
// its route's, and its body is the JSON object the front parsed (at least
// "{}"); rest's TestFrontRequestsAreValid holds the front to it. Its body
// is within the front's cap, the Channel's message limit less the
// envelope's slack.
func checkedByFront(ctx context.Context) bool {
	v, _ := ctx.Value(handOverKey{}).(handOverValue)
	return v.doc != nil
}

// parsedBody returns the document WithParsedBody put in ctx when it was
// parsed from these very bytes for format f, else nil.
func parsedBody(ctx context.Context, body []byte, f steps.Format) *steps.Document {
	v, _ := ctx.Value(handOverKey{}).(handOverValue)
	if v.doc == nil || !v.doc.Of(body) || v.doc.Format() != f {
		return nil
	}
	return v.doc
}

// handOver makes dst (a new message of src's type) hold src's fields by
// reference: bytes, strings and nested messages are shared, not copied.
func handOver(dst, src proto.Message) {
	switch d := dst.(type) { // the service's requests and replies, without reflection
	case *coordinatorv1.GenerateRequest:
		s := src.(*coordinatorv1.GenerateRequest)
		d.RequestId, d.Input = s.RequestId, s.Input
		return
	case *coordinatorv1.GenerateStreamRequest:
		s := src.(*coordinatorv1.GenerateStreamRequest)
		d.RequestId, d.Input = s.RequestId, s.Input
		return
	case *coordinatorv1.GenerateResponse:
		s := src.(*coordinatorv1.GenerateResponse)
		d.RequestId, d.Output = s.RequestId, s.Output
		return
	}
	r := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		r.Set(fd, v)
		return true
	})
}
