package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
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

// OTLP protocols (OTEL_EXPORTER_OTLP_PROTOCOL values).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// tracesPath is what OTLP over HTTP appends to a base endpoint.
const tracesPath = "/v1/traces"

// Tracing is how the process traces, resolved from the config's tracing
// keys and the OTEL_* environment (the keys win).
type Tracing struct {
	// On reports whether spans are exported.
	On bool
	// Protocol is ProtocolGRPC or ProtocolHTTP when On.
	Protocol string
	// Endpoint is where spans go as configured: the key's or the
	// variable's value, or "default".
	Endpoint string
}

// String is "off", or the protocol and endpoint ("http/protobuf
// http://collector:4318").
func (t *Tracing) String() string {
	if !t.On {
		return "off"
	}
	return t.Protocol + " " + t.Endpoint
}

// newTracing installs the OTLP exporter as the process's tracer provider
// when tracing is on, routes OpenTelemetry's own errors and logs through
// log, and flushes the spans at stop (a failed flush is logged). When it is off nothing is installed:
// spans are no-ops and legs forward the client's own traceparent
// unchanged. A setting that cannot work (an unknown protocol, sampler or
// exporter, a malformed URL or resource attribute) fails startup naming it.
func newTracing(lc fx.Lifecycle, cfg config.Config, log *slog.Logger) (*Tracing, error) {
	t, err := resolveTracing(cfg.Tracing, os.Getenv)
	if err != nil || !t.On {
		return t, err
	}
	exporter, err := newExporter(cfg.Tracing, t.Protocol)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	tp, err := NewTracerProvider(exporter, cfg.Tracing)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "error", err.Error())
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	lc.Append(fx.StopHook(func(ctx context.Context) {
		// Spans that cannot be flushed are no reason to fail a clean stop.
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("opentelemetry: flush at stop", "error", err.Error())
		}
	}))
	return t, nil
}

// resolveTracing decides whether tracing is on and over which protocol:
// tracing.enabled or OTEL_TRACES_EXPORTER=otlp (unless OTEL_SDK_DISABLED),
// tracing.protocol or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL, else grpc.
func resolveTracing(c config.Tracing, getenv func(string) string) (*Tracing, error) {
	on := c.Enabled
	if exporters := getenv("OTEL_TRACES_EXPORTER"); exporters != "" {
		for e := range strings.SplitSeq(exporters, ",") {
			switch strings.TrimSpace(e) {
			case "otlp":
				on = on || getenv("OTEL_SDK_DISABLED") != "true"
			case "none":
			default:
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", e)
			}
		}
	}
	protocol, source := c.Protocol, "tracing.protocol"
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if protocol == "" {
			protocol, source = getenv(name), name
		}
	}
	switch protocol {
	case "", ProtocolGRPC:
		protocol = ProtocolGRPC
	case "http", ProtocolHTTP:
		protocol = ProtocolHTTP
	default:
		return nil, fmt.Errorf(`%s: must be "grpc" or "http/protobuf", got %q`, source, protocol)
	}
	endpoint := "default"
	for _, e := range []string{c.TracesEndpoint, c.Endpoint, getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")} {
		if e != "" {
			endpoint = e
			break
		}
	}
	if _, err := samplerOf(c, getenv); err != nil {
		return nil, err
	}
	return &Tracing{On: on, Protocol: protocol, Endpoint: endpoint}, nil
}

// NewTracerProvider batches spans to exporter, sampling as t.SampleRatio
// or OTEL_TRACES_SAMPLER say, with the resource of t.ServiceName,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func NewTracerProvider(exporter sdktrace.SpanExporter, t config.Tracing) (*sdktrace.TracerProvider, error) {
	sampler, err := samplerOf(t, os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := newResource(t)
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSampler(sampler), sdktrace.WithResource(res)), nil
}

// newResource is service.name "coordinator", then what
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say, then
// tracing.service_name; with the SDK's own attributes.
func newResource(t config.Tracing) (*resource.Resource, error) {
	opts := []resource.Option{
		resource.WithAttributes(semconv.ServiceName("coordinator")),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	}
	if t.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(t.ServiceName)))
	}
	res, err := resource.New(context.Background(), opts...)
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}

// samplerOf is tracing.sample_ratio as parentbased_traceidratio when set,
// else OTEL_TRACES_SAMPLER (with OTEL_TRACES_SAMPLER_ARG), else
// parentbased_always_on.
func samplerOf(t config.Tracing, getenv func(string) string) (sdktrace.Sampler, error) {
	if t.SampleRatio != nil {
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*t.SampleRatio)), nil
	}
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: must be a number between 0 and 1, got %q", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not supported (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", name)
}

// newExporter is the OTLP exporter of protocol. What the config sets is
// passed as options, which win over the OTEL_EXPORTER_OTLP_* variables the
// exporter reads itself (endpoints, headers, timeout, TLS files,
// compression).
func newExporter(t config.Tracing, protocol string) (*otlptrace.Exporter, error) {
	ctx := context.Background() // the exporters connect lazily
	if protocol == ProtocolHTTP {
		opts, err := httpOptions(t)
		if err != nil {
			return nil, err
		}
		return otlptracehttp.New(ctx, opts...)
	}
	var opts []otlptracegrpc.Option
	switch e := firstOf(t.TracesEndpoint, t.Endpoint); {
	case strings.Contains(e, "://"):
		opts = append(opts, otlptracegrpc.WithEndpointURL(e))
	case e != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(e))
	}
	if t.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	if len(t.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(t.Headers))
	}
	if t.Timeout > 0 {
		opts = append(opts, otlptracegrpc.WithTimeout(t.Timeout))
	}
	return otlptracegrpc.New(ctx, opts...)
}

// httpOptions are the OTLP/HTTP exporter's options for what t sets: the
// traces endpoint as given, or the base endpoint with /v1/traces.
func httpOptions(t config.Tracing) ([]otlptracehttp.Option, error) {
	var opts []otlptracehttp.Option
	switch {
	case t.TracesEndpoint != "":
		opts = append(opts, otlptracehttp.WithEndpointURL(t.TracesEndpoint))
	case strings.Contains(t.Endpoint, "://"):
		u, err := url.Parse(t.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("tracing.endpoint: %w", err)
		}
		if !strings.HasSuffix(u.Path, tracesPath) {
			u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case t.Endpoint != "":
		opts = append(opts, otlptracehttp.WithEndpoint(t.Endpoint))
	}
	if t.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if len(t.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(t.Headers))
	}
	if t.Timeout > 0 {
		opts = append(opts, otlptracehttp.WithTimeout(t.Timeout))
	}
	return opts, nil
}

// firstOf is the first non-empty string.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
