package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/coordinator-project/coordinator/service/config"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveTracing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
		want Tracing
		err  string
	}{
		{name: "off by default", want: Tracing{Protocol: ProtocolGRPC, Endpoint: "default"}},
		{name: "the exporter variable turns it on", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			want: Tracing{On: true, Protocol: ProtocolGRPC, Endpoint: "default"}},
		{name: "the SDK disabled", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
			want: Tracing{Protocol: ProtocolGRPC, Endpoint: "default"}},
		{name: "the key wins over none", cfg: config.Tracing{Enabled: true}, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"},
			want: Tracing{On: true, Protocol: ProtocolGRPC, Endpoint: "default"}},
		{name: "protocol from the environment", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			want: Tracing{Protocol: ProtocolHTTP, Endpoint: "http://c:4318"}},
		{name: "the traces variable wins over the general one",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			want: Tracing{Protocol: ProtocolGRPC, Endpoint: "default"}},
		{name: "the key wins over the environment", cfg: config.Tracing{Protocol: "http", Endpoint: "http://key:4318"},
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317"},
			want: Tracing{Protocol: ProtocolHTTP, Endpoint: "http://key:4318"}},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: must be "grpc" or "http/protobuf", got "http/json"`},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			err: `OTEL_TRACES_EXPORTER: "zipkin" is not supported (otlp or none)`},
		{name: "bad sampler argument", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
			err: `OTEL_TRACES_SAMPLER_ARG: must be a number between 0 and 1, got "2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := resolveTracing(tt.cfg, envOf(tt.env))
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, *got)
		})
	}
}

func TestSamplerOf(t *testing.T) {
	t.Parallel()
	half := 0.5
	tests := []struct {
		name string
		cfg  config.Tracing
		env  map[string]string
		want string
	}{
		{name: "default", want: "ParentBased{root:AlwaysOnSampler,"},
		{name: "the key", cfg: config.Tracing{SampleRatio: &half}, env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"},
			want: "ParentBased{root:TraceIDRatioBased{0.5},"},
		{name: "always_off", env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, want: "AlwaysOffSampler"},
		{name: "ratio", env: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			want: "ParentBased{root:TraceIDRatioBased{0.25},"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := samplerOf(tt.cfg, envOf(tt.env))
			require.NoError(t, err)
			assert.Contains(t, s.Description(), tt.want)
		})
	}
}

// The config's endpoint wins over OTEL_EXPORTER_OTLP_ENDPOINT and is a base
// URL over HTTP; one that already ends in /v1/traces is kept.
func TestHTTPExporterEndpoint(t *testing.T) {
	paths := make(chan string, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
	}))
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens there
	for endpoint, want := range map[string]string{
		rcv.URL:                     "/v1/traces",
		rcv.URL + "/otlp/":          "/otlp/v1/traces",
		rcv.URL + "/otlp/v1/traces": "/otlp/v1/traces",
	} {
		exp, err := newExporter(config.Tracing{Endpoint: endpoint}, ProtocolHTTP)
		require.NoError(t, err)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		_, span := tp.Tracer("test").Start(context.Background(), "s")
		span.End()
		require.NoError(t, tp.Shutdown(context.Background()))
		assert.Equal(t, want, <-paths, endpoint)
	}
}
