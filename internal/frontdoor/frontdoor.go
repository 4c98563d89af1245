// Package frontdoor says by which front door a call reached the service,
// and hands the service what that front already did with it. The REST front
// sets it on the context of every call it makes through the in-process
// channel (With); the service, admission, logging, tracing and the stream
// guards read it (Of, Checked, ParsedBody). A network gRPC call has none:
// it came by the gRPC door and nothing was checked before the service.
//
// It is the one named handover between the REST front and the gRPC
// service, in place of context keys private to either side: go to the
// definition of With from the REST handler, and of ParsedBody from
// Coordinator.Generate, and both land here.
package frontdoor

import (
	"context"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// Door is the front door a call came in by.
type Door uint8

const (
	// GRPC is a call on the gRPC port (the zero value: no Call on the
	// context).
	GRPC Door = iota
	// REST is a call the REST front made in process: an OpenAI or
	// Anthropic REST request, transcoded by grpc-gateway.
	REST
)

// String is the door's label in metrics and logs: "grpc" or "rest".
func (d Door) String() string {
	if d == REST {
		return "rest"
	}
	return "grpc"
}

// Call is what the REST front tells the service of one call.
type Call struct {
	// Doc is the front's one parse of the request body, checked as the
	// service would check it (its format's structure, the body cap, the
	// structure limits); nil when the front parsed none.
	Doc *requestbody.Document
}

type callKey struct{}

// With returns ctx carrying call: the call came by the REST door.
func With(ctx context.Context, call *Call) context.Context {
	return context.WithValue(ctx, callKey{}, call)
}

func callOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Of reports the door ctx's call came in by.
func Of(ctx context.Context) Door {
	if callOf(ctx) != nil {
		return REST
	}
	return GRPC
}

// Checked reports whether the front already checked ctx's request (its
// body parsed and bounded): the service's own validation would repeat it.
func Checked(ctx context.Context) bool {
	c := callOf(ctx)
	return c != nil && c.Doc != nil
}

// ParsedBody returns the front's document of body when it parsed exactly
// these bytes for format f, so that the service does not parse them again;
// nil otherwise (a network call, or a body the front did not parse).
func ParsedBody(ctx context.Context, body []byte, f legs.Format) *requestbody.Document {
	c := callOf(ctx)
	if c == nil || c.Doc == nil || !c.Doc.Of(body) || c.Doc.Format() != f {
		return nil
	}
	return c.Doc
}
