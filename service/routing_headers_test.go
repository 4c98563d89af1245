package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// TestRoutingHeadersAreTheCoordinators: a gRPC client's routing metadata
// never reaches the request's legs (compat D24), counted once per request;
// a name server.trusted_routing_headers lists does. The legs carry the
// client's User-Agent without grpc-go's product.
func TestRoutingHeadersAreTheCoordinators(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Server.TrustedRoutingHeaders = []string{"X-Llm-D-Slo-Ttft-Ms"}
	m := metrics.New()
	c := NewCoordinator(nil, m, slog.New(slog.DiscardHandler), cfg, &legids.Registry{})
	md := metadata.Pairs(
		"x-gateway-destination-endpoint", "169.254.169.254:80", "x-prefiller-host-port", "10.0.0.8:8000",
		"x-data-parallel-rank", "1", "epp-profile", "prefill", "prefer", "if-available",
		"x-llm-d-slo-ttft-ms", "100", "x-custom", "c", "user-agent", "my-app/3 grpc-go/1.75.0",
	)
	ctx := metadata.NewIncomingContext(context.Background(), md)
	in := &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":"m"}`)}
	for range 2 {
		rc, _, err := c.requestContext(ctx, "rid-1", "rid-1", in)
		require.NoError(t, err)
		assert.Equal(t, []string{"user-agent", "x-custom", "x-llm-d-slo-ttft-ms"}, rc.Header.Names())
		assert.Equal(t, "my-app/3", rc.Header.Get("User-Agent"))
	}
	assert.InDelta(t, 2, routingDropped(t, m, "grpc", "chat"), 0)

	rc, _, err := c.requestContext(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-custom", "c")), "rid-2", "rid-2", in)
	require.NoError(t, err)
	assert.Equal(t, []string{"x-custom"}, rc.Header.Names())
	assert.InDelta(t, 2, routingDropped(t, m, "grpc", "chat"), 0, "a request without any is not counted")
}

// routingDropped is coordinator_client_routing_headers_dropped_total{api,endpoint}.
func routingDropped(t *testing.T, m *metrics.Metrics, api, endpoint string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "coordinator_client_routing_headers_dropped_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == api && labels["endpoint"] == endpoint {
				return s.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series api=%s endpoint=%s", api, endpoint)
	return 0
}

// TestTheSessionFieldIsTheSessionHeader: a call's session_id field
// (withSession) goes on the legs under pipeline.session_header, in place
// of the metadata's value, and picks the rank; without it the metadata's
// does.
func TestTheSessionFieldIsTheSessionHeader(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Pipeline.DPSize, cfg.Pipeline.SessionHeader = 8, "X-Rollout-Group"
	c := NewCoordinator(nil, metrics.New(), slog.New(slog.DiscardHandler), cfg, &legids.Registry{})
	in := &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":"m"}`)}
	md := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-rollout-group", "from-metadata"))
	for name, tc := range map[string]struct {
		ctx  context.Context
		want string
	}{
		"field":             {withSession(context.Background(), "from-field"), "from-field"},
		"field over header": {withSession(md, "from-field"), "from-field"},
		"header alone":      {md, "from-metadata"},
		"empty field":       {withSession(md, ""), "from-metadata"},
	} {
		rc, _, err := c.requestContext(tc.ctx, "rid", "rid", in)
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, rc.Header.Get("x-rollout-group"), name)
		assert.False(t, rc.Header.Has("x-session-id"), "%s: under the configured name only", name)
		assert.Equal(t, headers.DPRank(tc.want, 8), rc.DPRank, name)
	}
}
