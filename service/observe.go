package service

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/steps"
)

// headerServerTiming carries the step timings to the client: gRPC header
// metadata, and the REST front's Server-Timing header.
const headerServerTiming = "server-timing"

// tracer makes the request spans; a no-op until tracing is configured.
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service")

// startRequestSpan starts the request's span, as a child of the caller's
// traceparent (call metadata; REST headers arrive as metadata) if any.
func startRequestSpan(ctx context.Context, method string, rc *steps.RequestContext) (context.Context, trace.Span) {
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = otel.GetTextMapPropagator().Extract(ctx, metadataCarrier(md))
	return tracer.Start(ctx, "coordinator.v1.CoordinatorService/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("coordinator.request_id", rc.RequestID),
			attribute.String("coordinator.endpoint", rc.Format.String()),
			attribute.String("gen_ai.request.model", rc.Model),
			attribute.Bool("coordinator.stream", rc.Stream),
		))
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

// firstByteSink calls onFirst before the answer's first byte goes out, and
// onHeader with the header of a worker's answer it relays.
type firstByteSink struct {
	steps.Sink
	onHeader func(http.Header)
	onFirst  func()
	started  bool
}

// Header implements steps.Sink: the sinks it wraps leave answer headers to
// it.
func (s *firstByteSink) Header(h http.Header) { s.onHeader(h) }

func (s *firstByteSink) first() {
	if !s.started {
		s.started = true
		s.onFirst()
	}
}

func (s *firstByteSink) Response(status int, contentType string, body []byte) error {
	s.first()
	return s.Sink.Response(status, contentType, body)
}

func (s *firstByteSink) Events(data [][]byte) error {
	s.first()
	return s.Sink.Events(data)
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
