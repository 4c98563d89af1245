package rest

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// newGatewayMux is the grpc-gateway mux the front hands its checked
// requests to, with every option the seam sets (the table in doc.go):
// query parsing (installQueryParser: grpc-gateway keeps it global),
// marshalers, error handlers, header and trailer matchers, the status of an
// answer, and the framing of a stream.
func newGatewayMux() *runtime.ServeMux {
	installQueryParser()
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, rawJSON{}),
		runtime.WithMarshalerOption(mimeResponses, rawJSON{dialect: apierror.DialectResponses}),
		runtime.WithMarshalerOption(mimeMessages, rawJSON{dialect: apierror.DialectMessages}),
		runtime.WithErrorHandler(gatewayError),
		runtime.WithStreamErrorHandler(streamError),
		runtime.WithIncomingHeaderMatcher(headers.MetadataKey),
		runtime.WithOutgoingHeaderMatcher(headers.ResponseKey),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(forwardStatus),
		runtime.WithDisableChunkedEncoding(), // net/http chunks a stream itself
		runtime.WithDisablePathLengthFallback(),
	)
}

// binding is where an endpoint's requests go on the gateway mux: the paths
// of Generate's and GenerateStream's HTTP rules (proto/coordinator/v1; the
// ":stream" ones are reachable only through the front), and the endpoint's
// value of the query key openai.endpoint.
type binding struct {
	format           legs.Format
	dialect          apierror.Dialect
	path, streamPath string
	endpoint         []string
	// label names the route in metrics: the format's name, or a count's
	// (service.EndpointMessagesCountTokens, ...).
	label string
	// count: a token count route (count.go), onto CountTokens; the body's
	// "stream" is not read.
	count bool
	// contentType is the Content-Type of the requests the front hands the
	// gateway, which picks the marshaler by it (clients' Accept values
	// match no registered type): the dialect's (mimeResponses,
	// mimeMessages), whose marshaler frames a cut stream's error event.
	contentType []string
}

// The Content-Types that pick the Responses' and the Messages' marshaler
// (binding.contentType): JSON bodies, named for the coordinator alone.
const (
	mimeResponses = "application/x-coordinator-responses+json"
	mimeMessages  = "application/x-coordinator-messages+json"
)

func bindingOf(endpoint coordinatorv1.Endpoint) binding {
	format := service.FormatOf(endpoint)
	path := format.Path()
	b := binding{format: format, dialect: apierror.DialectOf(format), path: path, streamPath: path + ":stream",
		endpoint: []string{endpoint.String()}, contentType: jsonContentType, label: format.String()}
	switch b.dialect {
	case apierror.DialectResponses:
		b.contentType = []string{mimeResponses}
	case apierror.DialectMessages:
		b.contentType = []string{mimeMessages}
	}
	return b
}

// call is what the front and the gateway's handlers share about one
// request, through its context.
type call struct {
	id      string
	dialect apierror.Dialect
	// minted: the front made id, the client sent none (or an invalid one).
	minted bool
	// err is the stream's error when it ended before its first event
	// (streamError).
	err error
}

type callKey struct{}

// withCall returns ctx carrying c, for the gateway's handlers (streamError,
// gatewayError, the answer's writer) to find with callOf.
func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callOf is the front's call of ctx, nil if none (the queued routes).
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// forwardStatus gives a Generate answer the worker's status and content
// type, a CountTokens answer its content type, (and GetRequest and DeleteRequest theirs: forwardQueued).
func forwardStatus(_ context.Context, w http.ResponseWriter, m proto.Message) error {
	if c, ok := m.(*coordinatorv1.CountTokensResponse); ok {
		w.Header().Set("Content-Type", c.GetOpenai().GetContentType())
		return nil
	}
	resp, ok := m.(*coordinatorv1.GenerateResponse)
	if !ok || resp.GetOpenai() == nil {
		forwardQueued(w, m)
		return nil
	}
	if ct := resp.GetOpenai().GetContentType(); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if code := int(resp.GetOpenai().GetStatusCode()); code != 0 && code != http.StatusOK {
		w.WriteHeader(code)
	}
	return nil
}
