package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/sim"
)

// installTracing makes exporter the process's span sink for t, and turns
// tracing off again after it. Only one test may call it, not in parallel:
// the packages' tracers, taken from otel's globals at init, follow only
// the first tracer provider ever installed.
func installTracing(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewTracerProvider(exporter, config.Default().Tracing)
	require.NoError(t, err)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		// Tracing off again for the tests that follow. otel's initial
		// globals are delegates that cannot be set back, so set what
		// "off" means explicitly: no spans, nothing extracted or injected.
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		require.NoError(t, tp.Shutdown(context.Background()))
	})
	return exporter
}

// spansUntil flushes and returns the spans once one is named name: a
// server span ends after the client has its answer.
func spansUntil(t *testing.T, exporter *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	t.Helper()
	flusher := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error })
	var spans tracetest.SpanStubs
	require.Eventually(t, func() bool {
		require.NoError(t, flusher.ForceFlush(context.Background()))
		spans = exporter.GetSpans()
		for _, s := range spans {
			if s.Name == name {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "no span %q", name)
	exporter.Reset()
	return spans
}

// spanAttrs is a span's attributes by key.
func spanAttrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTracing runs alone (not in parallel): it installs the process's
// tracer provider for its duration.
func TestTracing(t *testing.T) {
	exporter := installTracing(t)
	t.Run("rest", func(t *testing.T) { testTracingREST(t, exporter) })
	t.Run("passthrough and grpc", func(t *testing.T) { testTracingPassthroughAndGRPC(t, exporter) })
}

func testTracingREST(t *testing.T, exporter *tracetest.InMemoryExporter) {
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	inbound := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"trace me"}]}`,
		http.Header{"Traceparent": {inbound}})
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	spans := spansUntil(t, exporter, "POST /v1/chat/completions")
	byName := map[string]tracetest.SpanStub{}
	for _, sp := range spans {
		byName[sp.Name] = sp
	}
	// The REST request's server span follows the HTTP conventions.
	root, ok := byName["POST /v1/chat/completions"]
	require.True(t, ok, "a request span: %v", names(spans))
	assert.Equal(t, trace.SpanKindServer, root.SpanKind)
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", root.SpanContext.TraceID().String(), "the inbound trace is continued")
	assert.Equal(t, "00f067aa0ba902b7", root.Parent.SpanID().String())
	attrs := spanAttrs(root)
	assert.Equal(t, "POST", attrs["http.request.method"].AsString())
	assert.Equal(t, "/v1/chat/completions", attrs["url.path"].AsString())
	assert.Equal(t, "/v1/chat/completions", attrs["http.route"].AsString())
	assert.Equal(t, "http", attrs["url.scheme"].AsString())
	assert.Equal(t, int64(200), attrs["http.response.status_code"].AsInt64())
	assert.Equal(t, "127.0.0.1", attrs["client.address"].AsString())
	assert.Equal(t, "sim-model", attrs["gen_ai.request.model"].AsString(), "the coordinator's attributes join the HTTP span")
	assert.NotEmpty(t, attrs["coordinator.request_id"].AsString())
	assert.Equal(t, codes.Unset, root.Status.Code)
	_, grpcSpan := byName["coordinator.v1.CoordinatorService/Generate"]
	assert.False(t, grpcSpan, "no second server span for the in-process call")
	for _, step := range []string{"render", "conditional-decode", "encode", "prefill", "decode"} {
		sp, ok := byName[step]
		require.True(t, ok, "a span for step %s: %v", step, names(spans))
		assert.Equal(t, root.SpanContext.SpanID(), sp.Parent.SpanID(), "step %s hangs off the request", step)
	}
	prefillLeg := byName["leg prefill"]
	assert.Equal(t, byName["prefill"].SpanContext.SpanID(), prefillLeg.Parent.SpanID(), "the leg hangs off its step")
	assert.Equal(t, trace.SpanKindClient, prefillLeg.SpanKind)

	// The cache miss is the answer conditional-decode asked for.
	miss := byName["leg conditional-decode"]
	assert.Equal(t, int64(http.StatusPreconditionFailed), spanAttrs(miss)["http.response.status_code"].AsInt64())
	assert.Equal(t, codes.Unset, miss.Status.Code, "a 412 cache miss is not an error")

	// The prefill worker got the leg span's own traceparent, in place of
	// the client's (one header line, not two).
	for _, leg := range s.Legs() {
		if leg.Profile == "prefill" {
			assert.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-" + prefillLeg.SpanContext.SpanID().String() + "-01"},
				leg.Header.Values("Traceparent"))
		}
	}
}

// testTracingPassthroughAndGRPC: a relayed path gets a server span that
// parents its leg; a network gRPC call gets an RPC server span; a client's
// mistake is not an error span, a 5xx is.
func testTracingPassthroughAndGRPC(t *testing.T, exporter *tracetest.InMemoryExporter) {
	_, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly)

	resp, err := st.client.Get(st.restURL + "/v1/models")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	spans := spansUntil(t, exporter, "GET")
	require.Len(t, spans, 2, "%v", names(spans))
	byName := map[string]tracetest.SpanStub{spans[0].Name: spans[0], spans[1].Name: spans[1]}
	server, leg := byName["GET"], byName["leg passthrough"]
	assert.Equal(t, trace.SpanKindServer, server.SpanKind, "no route names a relayed path: the span is the method")
	assert.Equal(t, "/v1/models", spanAttrs(server)["url.path"].AsString())
	_, hasRoute := spanAttrs(server)["http.route"]
	assert.False(t, hasRoute)
	assert.Equal(t, server.SpanContext.SpanID(), leg.Parent.SpanID(), "the relayed leg hangs off the server span")
	assert.Equal(t, server.SpanContext.TraceID(), leg.SpanContext.TraceID())

	// A 5xx of the gateway is an error of the server span.
	st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Sim-Fault": {"decode=status:503"}}).Body.Close()
	spans = spansUntil(t, exporter, "POST /v1/chat/completions")
	for _, sp := range spans {
		if sp.Name == "POST /v1/chat/completions" {
			assert.Equal(t, codes.Error, sp.Status.Code)
			assert.Equal(t, int64(503), spanAttrs(sp)["http.response.status_code"].AsInt64())
		}
	}

	// Over the network: the RPC conventions; a client's mistake (the
	// worker's 400, INVALID_ARGUMENT) is no error, the worker's 503
	// (UNAVAILABLE) is.
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for _, tt := range []struct {
		fault string
		code  int64
		span  codes.Code
	}{
		{fault: "decode=status:400", code: 3, span: codes.Unset},
		{fault: "decode=status:503", code: 14, span: codes.Error},
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(),
			"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-sim-fault", tt.fault)
		_, err = client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(chatBody)}}})
		require.Error(t, err, tt.fault)
		spans = spansUntil(t, exporter, "coordinator.v1.CoordinatorService/Generate")
		var rpc *tracetest.SpanStub
		for i := range spans {
			if spans[i].Name == "coordinator.v1.CoordinatorService/Generate" {
				rpc = &spans[i]
			}
		}
		require.NotNil(t, rpc, "%v", names(spans))
		attrs := spanAttrs(*rpc)
		assert.Equal(t, trace.SpanKindServer, rpc.SpanKind)
		assert.Equal(t, "grpc", attrs["rpc.system"].AsString())
		assert.Equal(t, "coordinator.v1.CoordinatorService", attrs["rpc.service"].AsString())
		assert.Equal(t, "Generate", attrs["rpc.method"].AsString())
		assert.Equal(t, tt.code, attrs["rpc.grpc.status_code"].AsInt64(), tt.fault)
		assert.Equal(t, tt.span, rpc.Status.Code, tt.fault)
		assert.Equal(t, "00f067aa0ba902b7", rpc.Parent.SpanID().String())
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
