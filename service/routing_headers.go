package service

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/metadata"

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
// headers the policy forwards (forwardedHeaders), the phases' own session
// tokens of a joined x-session-token (steps.RequestContext.PDHeader), and,
// with pipeline.dp_size, the data-parallel rank its prefill and decode legs are
// pinned to: that of its session id (pipeline.session_header), else of its
// request id.
func (c *Coordinator) routeLegs(ctx context.Context, rc *steps.RequestContext) {
	rc.Header = c.forwardedHeaders(ctx, rc.RequestID, rc.Format.String())
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
