package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/spans"
	"github.com/coordinator-project/coordinator/steps"
)

// tracer makes the request spans; a no-op until tracing is configured.
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service")

// RequestSpan is the span a call's pipeline runs under: its own server
// span for a network gRPC call; for a REST request (in process) the REST
// front's HTTP server span, which the front ends and whose status follows
// the HTTP status.
type RequestSpan struct {
	trace.Span
	own bool
}

// StartRequestSpan starts a network call's server span, named after the
// method with the OpenTelemetry RPC attributes, as a child of the caller's
// traceparent (call metadata) if any. An in-process call's span is the
// REST front's: it gets the same coordinator attributes.
//
// With tracing off (spans.On) the call gets ctx's no-op span and costs
// nothing.
func StartRequestSpan(ctx context.Context, method string, rc *steps.RequestContext) (context.Context, RequestSpan) {
	if !spans.On() || frontdoor.Of(ctx) == frontdoor.REST {
		span := trace.SpanFromContext(ctx)
		if span.IsRecording() {
			span.SetAttributes(requestAttributes(rc)...)
		}
		return ctx, RequestSpan{Span: span}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = otel.GetTextMapPropagator().Extract(ctx, metadataCarrier(md))
	ctx, span := tracer.Start(ctx, rpcService+"/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(append(requestAttributes(rc), semconv.RPCSystemGRPC, semconv.RPCService(rpcService), semconv.RPCMethod(method))...))
	return ctx, RequestSpan{Span: span, own: true}
}

// requestAttributes are the coordinator's attributes of a request's span.
func requestAttributes(rc *steps.RequestContext) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("coordinator.request_id", rc.RequestID),
		attribute.String("coordinator.endpoint", rc.Format.String()),
		attribute.String("gen_ai.request.model", rc.Model),
		attribute.Bool("coordinator.stream", rc.Stream),
	}
}

// rpcService is CoordinatorService's full name.
const rpcService = "coordinator.v1.CoordinatorService"

// Fail marks the span of a call that ended with code as an error, when the
// code means the server's fault (the OpenTelemetry RPC conventions: a
// client's mistake such as INVALID_ARGUMENT or NOT_FOUND is not).
func (s RequestSpan) Fail(code codes.Code, msg string) {
	if !s.own {
		return
	}
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		s.SetStatus(otelcodes.Error, msg)
	}
}

// Finish records the call's code and ends a span of its own.
func (s RequestSpan) Finish(code codes.Code) {
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
