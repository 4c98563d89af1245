package service

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/steps"
)

// headerServerTiming carries the step timings to the client: gRPC header
// metadata, and the REST front's Server-Timing header.
const headerServerTiming = "server-timing"

// tracer makes the request spans; a no-op until tracing is configured.
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service")

// requestSpan is the span a call's pipeline runs under: its own server
// span for a network gRPC call; for a REST request (in process) the REST
// front's HTTP server span, which the front ends and whose status follows
// the HTTP status.
type requestSpan struct {
	trace.Span
	own bool
}

// startRequestSpan starts a network call's server span, named after the
// method with the OpenTelemetry RPC attributes, as a child of the caller's
// traceparent (call metadata) if any. An in-process call's span is the
// REST front's: it gets the same coordinator attributes.
func startRequestSpan(ctx context.Context, method string, rc *steps.RequestContext) (context.Context, requestSpan) {
	attrs := []attribute.KeyValue{
		attribute.String("coordinator.request_id", rc.RequestID),
		attribute.String("coordinator.endpoint", rc.Format.String()),
		attribute.String("gen_ai.request.model", rc.Model),
		attribute.Bool("coordinator.stream", rc.Stream),
	}
	if CalledInProcess(ctx) {
		span := trace.SpanFromContext(ctx)
		if span.IsRecording() {
			span.SetAttributes(attrs...)
		}
		return ctx, requestSpan{Span: span}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = otel.GetTextMapPropagator().Extract(ctx, metadataCarrier(md))
	ctx, span := tracer.Start(ctx, rpcService+"/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(append(attrs, semconv.RPCSystemGRPC, semconv.RPCService(rpcService), semconv.RPCMethod(method))...))
	return ctx, requestSpan{Span: span, own: true}
}

// rpcService is CoordinatorService's full name.
const rpcService = "coordinator.v1.CoordinatorService"

// fail marks the span of a call that ended with code as an error, when the
// code means the server's fault (the OpenTelemetry RPC conventions: a
// client's mistake such as INVALID_ARGUMENT or NOT_FOUND is not).
func (s requestSpan) fail(code codes.Code, msg string) {
	if !s.own {
		return
	}
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		s.SetStatus(otelcodes.Error, msg)
	}
}

// end records the call's code and ends a span of its own.
func (s requestSpan) end(code codes.Code) {
	if !s.own {
		return
	}
	s.SetAttributes(semconv.RPCGRPCStatusCodeKey.Int(int(code)))
	s.End()
}

// metadataCarrier reads trace context from call metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// serverTiming renders the steps run so far as a Server-Timing value,
// durations in milliseconds: "render;dur=1.2, prefill;dur=35.0".
func serverTiming(timings []steps.Timing) string {
	var b strings.Builder
	for _, t := range timings {
		if t.Outcome == steps.OutcomeSkipped {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Step)
		b.WriteString(";dur=")
		b.WriteString(strconv.FormatFloat(float64(t.Duration.Microseconds())/1000, 'f', 1, 64))
	}
	return b.String()
}

// setServerTiming gives the client the step timings so far (Server-Timing
// header metadata), unless there are none yet: never an empty header.
func setServerTiming(ctx context.Context, timings []steps.Timing) {
	if v := serverTiming(timings); v != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(headerServerTiming, v))
	}
}

// answerSink watches the answer on its way to the client: it calls onFirst
// before the first byte goes out and onHeader with the header of a worker's
// answer it relays, counts the bytes, times the gaps between a stream's
// events (interToken). Only a Sink's own goroutine calls it.
type answerSink struct {
	steps.Sink
	onHeader   func(http.Header)
	onFirst    func()
	interToken prometheus.Observer
	started    bool
	last       time.Time // when the previous events went out
	bytes      int
}

// Header implements steps.Sink: the sinks it wraps leave answer headers to
// it.
func (s *answerSink) Header(h http.Header) { s.onHeader(h) }

func (s *answerSink) first() {
	if !s.started {
		s.started = true
		s.onFirst()
	}
}

func (s *answerSink) Response(status int, contentType string, body []byte) error {
	s.first()
	s.bytes += len(body)
	return s.Sink.Response(status, contentType, body)
}

func (s *answerSink) Events(data [][]byte, names []string) error {
	s.first()
	now := time.Now()
	tokens := 0
	for _, d := range data {
		s.bytes += len(d)
		if string(d) == "[DONE]" {
			continue
		}
		tokens++
	}
	if !s.last.IsZero() && tokens > 0 {
		gap := now.Sub(s.last).Seconds() / float64(tokens)
		for range tokens {
			s.interToken.Observe(gap)
		}
	}
	if tokens > 0 {
		s.last = now
	}
	return s.Sink.Events(data, names)
}

type inProcessKey struct{}

// CalledInProcess reports whether the call came through the in-process Channel
// (the REST front) rather than the network.
func CalledInProcess(ctx context.Context) bool {
	v, _ := ctx.Value(inProcessKey{}).(bool)
	return v
}

// timingsValue logs the steps that ran with their durations.
type timingsValue []steps.Timing

func (t timingsValue) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(t))
	for _, s := range t {
		if s.Outcome != steps.OutcomeSkipped {
			attrs = append(attrs, slog.Duration(s.Step, s.Duration))
		}
	}
	return slog.GroupValue(attrs...)
}

// reportAnswer counts the tokens of an answered request as its answer's
// usage reported them (rc.Usage, recorded by the decode-profile steps).
func (c *Coordinator) reportAnswer(api string, rc *steps.RequestContext, err error) {
	if err != nil || !rc.Usage.Reported {
		return
	}
	c.metrics.Tokens(api, rc.Model, rc.Usage.PromptTokens, rc.Usage.CompletionTokens)
	c.metrics.PromptTokensBilled(rc.Usage)
}
