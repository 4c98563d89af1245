package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/tracing"
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
		tp, err := tracing.NewTracerProvider(discardExporter{}, config.Default().Tracing)
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

// BenchmarkEPDImage is the E/P/D cascade (replace-media-urls, render,
// encode, prefill, decode) of a chat with one 1 MB inline image and 64 KB
// of text, against fakes of the workers and the render service that
// answer at once, so a CPU profile shows the coordinator's own work (the
// fakes' reading of the legs aside: pprof -ignore 'fakeLeg').
func BenchmarkEPDImage(b *testing.B) {
	gw := steptest.NewGateway(b, fakeLeg)
	render := steptest.NewGateway(b, fakeRender(16<<10))
	st := startStackEnv(b, map[string]string{"COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE": "8"}, gw.URL, render.URL, mediaPipeline)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 64<<10/45)
	image := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 1, 2, 3, 4, 5}, 1<<20/12))
	body := []byte(`{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"` + text + `"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + image + `"}}]}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		resp, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %s", resp.StatusCode, answer)
		}
	}
}

// fakeLeg answers a leg by its EPP-Profile, as the workers would.
func fakeLeg(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch r.Header.Get("EPP-Profile") {
	case "encode":
		_, _ = io.WriteString(w, `{"choices":[],"ec_transfer_params":{"h0":{"peer_host":"10.0.0.1","peer_port":5501,"size_bytes":2359296}}}`)
	case "prefill":
		_, _ = io.WriteString(w, `{"choices":[],"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":["1","2","4"],`+
			`"remote_engine_id":"e1","remote_request_id":"r","remote_host":"10.0.0.42","remote_port":5600,"tp_size":1}}`)
	default:
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}]}`)
	}
}

// fakeRender answers a chat render with n token IDs and one image.
func fakeRender(n int) http.HandlerFunc {
	ids := make([]byte, 0, 6*n)
	for i := range n {
		if i > 0 {
			ids = append(ids, ',')
		}
		ids = fmt.Appendf(ids, "%d", 1000+i*7%90000)
	}
	answer := []byte(`{"request_id":"r","token_ids":[` + string(ids) + `],"features":{"mm_hashes":{"image":["h0"]},` +
		`"mm_placeholders":{"image":[{"offset":5,"length":64}]},"kwargs_data":{"image":["dGVuc29y"]}},"sampling_params":{"max_tokens":4}}`)
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}
}
