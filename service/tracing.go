package service

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/service/config"
)

// setUpTracing installs the OTLP exporter as the process's tracer provider
// when tracing is enabled, and flushes it at stop. When it is off nothing
// is installed: spans are no-ops and legs forward the client's own
// traceparent unchanged.
func setUpTracing(lc fx.Lifecycle, cfg config.Config, log *slog.Logger) error {
	t := cfg.Tracing
	if !t.Enabled {
		return nil
	}
	exporter, err := newExporter(t)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	tp := NewTracerProvider(exporter, t)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	log.Debug("tracing on", "protocol", t.Protocol, "endpoint", t.Endpoint, "sample_ratio", t.SampleRatio)
	lc.Append(fx.StopHook(func(ctx context.Context) error { return tp.Shutdown(ctx) }))
	return nil
}

// NewTracerProvider batches spans to exporter, sampling new traces at
// t.SampleRatio and following the caller's decision otherwise.
func NewTracerProvider(exporter sdktrace.SpanExporter, t config.Tracing) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(t.ServiceName))),
	)
}

func newExporter(t config.Tracing) (*otlptrace.Exporter, error) {
	ctx := context.Background() // the exporters connect lazily
	if t.Protocol == "http" {
		var opts []otlptracehttp.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(t.Endpoint))
		}
		if t.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	var opts []otlptracegrpc.Option
	if t.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(t.Endpoint))
	}
	if t.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return otlptracegrpc.New(ctx, opts...)
}
