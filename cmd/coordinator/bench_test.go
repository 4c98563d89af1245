package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// BenchmarkRESTStream measures one streamed chat of 32 events through the
// whole app (REST front, in-process channel, interceptors, pipeline, decode
// relay) against a gateway that answers at once.
func BenchmarkRESTStream(b *testing.B) {
	var events strings.Builder
	for i := range 31 {
		fmt.Fprintf(&events, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"}}]}\n\n", i)
	}
	events.WriteString("data: [DONE]\n\n")
	gw := steptest.NewGateway(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events.String())
	})
	st := startStack(b, gw.URL, "", decodeOnly)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		resp, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}

// BenchmarkRESTChat is the same for a non-streaming chat.
func BenchmarkRESTChat(b *testing.B) {
	gw := steptest.NewGateway(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}`)
	})
	st := startStack(b, gw.URL, "", decodeOnly)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		resp, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkTracingCost is BenchmarkRESTChat with tracing off (the default:
// no tracer provider installed) and on (every request sampled, spans
// batched to an exporter that drops them), to show what tracing costs.
func BenchmarkTracingCost(b *testing.B) {
	gw := steptest.NewGateway(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}`)
	})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	run := func(b *testing.B) {
		st := startStack(b, gw.URL, "", decodeOnly)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		tp, err := service.NewTracerProvider(discardExporter{}, config.Default().Tracing)
		if err != nil {
			b.Fatal(err)
		}
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		b.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
		run(b)
	})
}

// discardExporter drops spans.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
