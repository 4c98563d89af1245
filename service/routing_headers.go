package service

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// RoutingHeadersDropped reports a request whose own routing headers were
// removed before any leg (compat D24; headers.Routing): one info line
// naming the request, its API and endpoint and the headers removed, then
// more attributes, and a count in
// coordinator_client_routing_headers_dropped_total. The service reports its
// requests, the REST front its relayed ones.
func RoutingHeadersDropped(ctx context.Context, m *metrics.Metrics, log *slog.Logger, id, api, endpoint string, dropped []string, more ...any) {
	m.ClientRoutingHeadersDropped(api, endpoint)
	log.InfoContext(ctx, "client routing headers dropped",
		append([]any{"request_id", id, "api", api, "endpoint", endpoint, "headers", dropped}, more...)...)
}

// forwardedHeaders is the call metadata every leg of request id carries as
// headers (headers.FromMetadata): the client's routing headers that
// server.trusted_routing_headers does not name are removed and reported.
func (c *Coordinator) forwardedHeaders(ctx context.Context, id, endpoint string) headers.Forwarded {
	md, _ := metadata.FromIncomingContext(ctx)
	f, dropped := headers.FromMetadata(md, c.trusted)
	if dropped != nil {
		RoutingHeadersDropped(ctx, c.metrics, c.log, id, apiOf(ctx), endpoint, dropped)
	}
	return f
}

// routeLegs sets what the request's legs carry for routing: the client
// headers the policy forwards (forwardedHeaders), the session id of the
// call's session_id field in the session header (withSession: it replaces
// the metadata's), the phases' own session
// tokens of a joined x-session-token (steps.RequestContext.PDHeader), and,
// with pipeline.dp_size, the data-parallel rank its prefill and decode legs are
// pinned to: that of its session id (pipeline.session_header), else of its
// request id.
func (c *Coordinator) routeLegs(ctx context.Context, rc *steps.RequestContext) {
	rc.Header = c.forwardedHeaders(ctx, rc.RequestID, rc.Format.String())
	if id, _ := ctx.Value(sessionKey{}).(string); id != "" {
		rc.Header.Set(c.sessionHeader, id)
	}
	if t, joined := headers.SplitSessionToken(rc.Header.Get(headers.SessionToken)); joined {
		rc.SessionTokens = t
		rc.Header.Del(headers.SessionToken)
	}
	if c.dpSize < 2 {
		return
	}
	key := rc.Header.Get(c.sessionHeader)
	if key == "" {
		key = rc.RequestID
	}
	rc.DPRank = headers.DPRank(key, c.dpSize)
}

// sessionKey keys the session_id field of a Generate or GenerateStream
// call in its context (withSession).
type sessionKey struct{}

// withSession is ctx carrying a call's session_id field for routeLegs; ctx
// itself when the field is empty.
func withSession(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, id)
}

// sessionStream is a GenerateStream call whose context carries the
// request's session_id field (withSession).
type sessionStream struct {
	grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
	ctx context.Context
}

// Context implements grpc.ServerStream.
func (s sessionStream) Context() context.Context { return s.ctx }

// withSessionStream is stream with req's session_id field in its context
// (withSession); stream itself when the field is empty.
func withSessionStream(stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse], req *coordinatorv1.GenerateStreamRequest) grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse] {
	id := req.GetSessionId()
	if id == "" {
		return stream
	}
	return sessionStream{ServerStreamingServer: stream, ctx: withSession(stream.Context(), id)}
}
