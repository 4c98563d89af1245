package inproc

import (
	"context"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"

	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// The REST front parses each inference body once, to answer a malformed
// one with 400 and to see "stream". Its parse reaches the service in
// process instead of being done again: WithParsedBody puts the document in
// the call's context, and the Channel hands the request message over
// without copying it, so the service finds the very bytes the document was
// parsed from (steps.Document.Of) and takes the document as its own. A
// network gRPC call, or any copy on the way, is parsed by the service.

// frontCall is the REST front's call through the Channel: the document of
// the body it parsed, and the stream it opened, which EndStreams ends.
type frontCall struct {
	doc    *requestbody.Document
	stream *stream
}

type frontCallKey struct{}

// WithParsedBody returns ctx marking the call about to be made on it
// through the Channel as the REST front's, with doc, the parsed body of
// its request. The Channel then hands the messages over instead of
// copying them: the caller does not read or modify the request once it is
// sent, nor the handler its reply once returned, and a stream's message is
// the caller's only until its next RecvMsg, when the handler may reuse it.
// A caller that opens a stream on ctx calls EndStreams once done with it.
func WithParsedBody(ctx context.Context, doc *requestbody.Document) context.Context {
	return context.WithValue(ctx, frontCallKey{}, &frontCall{doc: doc})
}

// frontCallOf is ctx's frontCall, nil if none.
func frontCallOf(ctx context.Context) *frontCall {
	fc, _ := ctx.Value(frontCallKey{}).(*frontCall)
	return fc
}

// EndStreams ends the stream opened on ctx (WithParsedBody) if its caller
// stopped receiving before its end: the handler runs to its end, each send
// failing. Its caller calls it once done with the stream's messages, which
// is why such a stream is not ended by its context ending, as others are:
// the handler would reuse a message the caller may still be writing out.
func EndStreams(ctx context.Context) {
	if fc := frontCallOf(ctx); fc != nil && fc.stream != nil {
		fc.stream.abandon()
	}
}

// CheckedByFront reports whether the call is the REST front's
// (WithParsedBody; a network call's context never carries it). Such a
// request meets every protovalidate rule by construction: its request id
// passed requestid.OrNew (the rule's length and alphabet), its endpoint is
// its route's, and its body is the JSON object the front parsed (at least
// "{}"); rest's TestFrontRequestsAreValid holds the front to it. Its body
// is within the front's cap, the Channel's message limit less the
// envelope's slack.
func CheckedByFront(ctx context.Context) bool { return frontCallOf(ctx) != nil }

// ParsedBody returns the document WithParsedBody put in ctx when it was
// parsed from these very bytes for format f, else nil.
func ParsedBody(ctx context.Context, body []byte, f legs.Format) *requestbody.Document {
	fc := frontCallOf(ctx)
	if fc == nil || !fc.doc.Of(body) || fc.doc.Format() != f {
		return nil
	}
	return fc.doc
}

// handOver makes dst (a new message of src's type) hold src's fields by
// reference: bytes, strings and nested messages are shared, not copied.
// The service's messages are; another is copied (proto.Merge), as no
// caller of the REST front's sends one.
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
	case *coordinatorv1.GenerateStreamResponse:
		d.Chunk = src.(*coordinatorv1.GenerateStreamResponse).Chunk
		return
	}
	proto.Merge(dst, src)
}
