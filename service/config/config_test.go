package config_test

import (
	"math"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/steps/upstream"
)

const (
	referencePath = "testdata/reference-coordinator.yaml"
	samplePath    = "../../config/coordinator/coordinator.yaml"
	minimal       = "gateway:\n  address: http://gw:80\n"
)

// env is a lookupEnv backed by a map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// reference is what the reference sample config loads to.
// withServerExtensions sets our server keys (not in the reference) to
// their defaults.
func withServerExtensions(s config.Server) config.Server {
	s.ReadHeaderTimeout = 10 * time.Second
	s.MaxHeaderBytes = 256 << 10
	s.StreamWriteTimeout = 30 * time.Second
	s.MaxConcurrentRequests = 4096
	s.MaxConcurrentStreams = 2048
	s.RetryAfter = time.Second
	return s
}

// withGatewayExtensions sets our gateway keys to their defaults.
func withGatewayExtensions(g config.Gateway) config.Gateway {
	g.ConnectTimeout = 10 * time.Second
	g.StreamIdleTimeout = 120 * time.Second
	g.Retry = upstream.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	return g
}

func reference() config.Config {
	return config.Config{
		LogLevel: 2,
		Server: withServerExtensions(config.Server{
			ListenAddr:         ":8080",
			GRPCListenAddr:     ":9090",
			ReadTimeout:        30 * time.Second,
			WriteTimeout:       120 * time.Second,
			ShutdownTimeout:    25 * time.Second,
			MaxRequestBodySize: 64,
		}),
		Gateway: withGatewayExtensions(config.Gateway{
			Address:             "http://inference-gateway:80",
			MaxIdleConnsPerHost: 200,
			IdleConnTimeout:     90 * time.Second,
			Timeout:             60 * time.Second,
		}),
		Pipeline: config.Pipeline{
			KVConnector:     "kv-shared-storage",
			ECConnector:     "ec-shared-storage",
			UseOpenAIFormat: true,
			Steps: []config.Step{
				{Type: "replace-media-urls", Params: map[string]any{
					"download_timeout":         "10s",
					"max_concurrent_downloads": 10,
				}},
				{Type: "render", Params: map[string]any{
					"address":                 "http://rendering-service:8080",
					"timeout":                 "30s",
					"max_idle_conns_per_host": 100,
					"idle_conn_timeout":       "90s",
				}},
				{Type: "encode", Params: map[string]any{"max_parallel": 8}},
				{Type: "prefill", Params: map[string]any{}},
				{Type: "decode", Params: map[string]any{}},
			},
		},
		Tracing: config.Default().Tracing,
	}
}

func TestLoadReference(t *testing.T) {
	t.Parallel()
	got, err := config.Load(referencePath, nil)
	require.NoError(t, err)
	assert.Equal(t, reference(), got)
}

func TestLoadSample(t *testing.T) {
	t.Parallel()
	got, err := config.Load(samplePath, nil)
	require.NoError(t, err)
	// Our sample is the reference sample plus our extension keys, set to
	// their defaults.
	assert.Equal(t, reference(), got)
}

// TestSampleDocumentsEveryKey checks that each key of Config appears in the
// annotated sample (set or commented out).
func TestSampleDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(samplePath)
	require.NoError(t, err)
	var keys []string
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			keys = append(keys, f.Tag.Get("param"))
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[config.Config]())
	require.Contains(t, keys, "grpc_listen_addr")
	for _, key := range keys {
		re := regexp.MustCompile(`(?m)^[ #-]*` + key + `:`)
		assert.Regexp(t, re, string(data), "key %s is not in %s", key, samplePath)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	want := config.Default()
	want.Gateway.Address = "http://gw:80"

	got, err := config.Parse([]byte(minimal), nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	assert.Equal(t, config.Config{
		LogLevel: 2,
		Server: withServerExtensions(config.Server{
			ListenAddr:         ":8080",
			GRPCListenAddr:     ":9090",
			ReadTimeout:        30 * time.Second,
			WriteTimeout:       120 * time.Second,
			ShutdownTimeout:    25 * time.Second,
			MaxRequestBodySize: 64,
		}),
		Gateway: withGatewayExtensions(config.Gateway{
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
			Timeout:             60 * time.Second,
		}),
		Pipeline: config.Pipeline{UseOpenAIFormat: true},
		// Tracing keys left unset: the OTEL_* variables decide (service/tracing.go).
		Tracing: config.Tracing{},
	}, config.Default(), "the defaults of compat §2.2, and tracing off")
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		_, err := config.Parse([]byte(doc), nil)
		assert.EqualError(t, err, "gateway.address: required", "doc %q", doc)

		got, err := config.Parse([]byte(doc), env(map[string]string{"COORDINATOR_GATEWAY_ADDRESS": "http://gw"}))
		require.NoError(t, err, "doc %q", doc)
		want := config.Default()
		want.Gateway.Address = "http://gw"
		assert.Equal(t, want, got, "doc %q", doc)
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	withRender := minimal + "pipeline:\n  steps:\n    - type: render\n"
	tests := []struct {
		name string
		yaml string
		vars map[string]string
		want func(*config.Config)
	}{
		{
			name: "max request body size",
			vars: map[string]string{"COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE": "128"},
			want: func(c *config.Config) { c.Server.MaxRequestBodySize = 128 },
		},
		{
			name: "log level",
			vars: map[string]string{"COORDINATOR_LOG_LEVEL": "5"},
			want: func(c *config.Config) { c.LogLevel = 5 },
		},
		{
			name: "use openai format",
			yaml: withRender,
			vars: map[string]string{"COORDINATOR_PIPELINE_USE_OPENAI_FORMAT": "false"},
			want: func(c *config.Config) {
				c.Pipeline.UseOpenAIFormat = false
				c.Pipeline.Steps = []config.Step{{Type: "render", Params: map[string]any{}}}
			},
		},
		{
			name: "gateway address",
			vars: map[string]string{"COORDINATOR_GATEWAY_ADDRESS": "http://x:80"},
			want: func(c *config.Config) { c.Gateway.Address = "http://x:80" },
		},
		{
			name: "kv connector absent from the file",
			vars: map[string]string{"COORDINATOR_PIPELINE_KV_CONNECTOR": "kv-nixl"},
			want: func(c *config.Config) { c.Pipeline.KVConnector = "kv-nixl" },
		},
		{
			name: "an optional number: tracing sample ratio",
			vars: map[string]string{"COORDINATOR_TRACING_SAMPLE_RATIO": "0.25", "COORDINATOR_TRACING_PROTOCOL": "http/protobuf"},
			want: func(c *config.Config) {
				r := 0.25
				c.Tracing.SampleRatio = &r
				c.Tracing.Protocol = "http/protobuf"
			},
		},
		{
			name: "ec connector",
			vars: map[string]string{"COORDINATOR_PIPELINE_EC_CONNECTOR": "ec-nixl"},
			want: func(c *config.Config) { c.Pipeline.ECConnector = "ec-nixl" },
		},
		{
			name: "durations",
			vars: map[string]string{
				"COORDINATOR_SERVER_READ_TIMEOUT":       "5s",
				"COORDINATOR_SERVER_WRITE_TIMEOUT":      "1m",
				"COORDINATOR_SERVER_SHUTDOWN_TIMEOUT":   "2s",
				"COORDINATOR_GATEWAY_IDLE_CONN_TIMEOUT": "3s",
				"COORDINATOR_GATEWAY_TIMEOUT":           "4s",
			},
			want: func(c *config.Config) {
				c.Server.ReadTimeout = 5 * time.Second
				c.Server.WriteTimeout = time.Minute
				c.Server.ShutdownTimeout = 2 * time.Second
				c.Gateway.IdleConnTimeout = 3 * time.Second
				c.Gateway.Timeout = 4 * time.Second
			},
		},
		{
			name: "listen addresses and pool",
			vars: map[string]string{
				"COORDINATOR_SERVER_LISTEN_ADDR":              "127.0.0.1:8081",
				"COORDINATOR_SERVER_GRPC_LISTEN_ADDR":         ":9999",
				"COORDINATOR_GATEWAY_MAX_IDLE_CONNS_PER_HOST": "7",
			},
			want: func(c *config.Config) {
				c.Server.ListenAddr = "127.0.0.1:8081"
				c.Server.GRPCListenAddr = ":9999"
				c.Gateway.MaxIdleConnsPerHost = 7
			},
		},
		{
			name: "env wins over the file",
			yaml: minimal + "log_level: 3\nserver:\n  max_request_body_size: 32\n",
			vars: map[string]string{"COORDINATOR_LOG_LEVEL": "4", "COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE": "16"},
			want: func(c *config.Config) {
				c.LogLevel = 4
				c.Server.MaxRequestBodySize = 16
			},
		},
		{
			name: "empty variable is unset",
			yaml: minimal + "log_level: 3\n",
			vars: map[string]string{"COORDINATOR_LOG_LEVEL": ""},
			want: func(c *config.Config) { c.LogLevel = 3 },
		},
		{
			name: "zero body size means the default",
			vars: map[string]string{"COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE": "0"},
			want: func(*config.Config) {},
		},
		{
			name: "steps and unknown names are not read",
			vars: map[string]string{"COORDINATOR_PIPELINE_STEPS": "[]", "COORDINATOR_BOGUS": "1", "COORDINATOR_SERVER": "x"},
			want: func(*config.Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := tt.yaml
			if doc == "" {
				doc = minimal
			}
			got, err := config.Parse([]byte(doc), env(tt.vars))
			require.NoError(t, err)
			want := config.Default()
			want.Gateway.Address = "http://gw:80"
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

func TestEnvOverrideOfReferenceFile(t *testing.T) {
	t.Parallel()
	got, err := config.Load(referencePath, env(map[string]string{
		"COORDINATOR_PIPELINE_USE_OPENAI_FORMAT": "false",
		"COORDINATOR_GATEWAY_ADDRESS":            "https://gw.example/",
	}))
	require.NoError(t, err)
	assert.False(t, got.Pipeline.UseOpenAIFormat)
	assert.Equal(t, "https://gw.example", got.Gateway.Address)
	assert.Len(t, got.Pipeline.Steps, 5)
}

func TestEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, value, err string
	}{
		{name: "int", key: "COORDINATOR_LOG_LEVEL", value: "abc", err: `COORDINATOR_LOG_LEVEL: expected an integer, got "abc"`},
		{name: "int from float", key: "COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE", value: "1.5", err: `COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE: expected an integer, got "1.5"`},
		{name: "bool", key: "COORDINATOR_PIPELINE_USE_OPENAI_FORMAT", value: "yes", err: `COORDINATOR_PIPELINE_USE_OPENAI_FORMAT: expected true or false, got "yes"`},
		{name: "duration", key: "COORDINATOR_GATEWAY_TIMEOUT", value: "30", err: `COORDINATOR_GATEWAY_TIMEOUT: expected a duration like "30s", got "30"`},
		{name: "validated after env", key: "COORDINATOR_LOG_LEVEL", value: "9", err: "log_level: must be between 1 and 5, got 9"},
		{name: "address validated after env", key: "COORDINATOR_GATEWAY_ADDRESS", value: "gw:80", err: `gateway.address: must be an http(s) URL with a host, got "gw:80"`},
		{name: "negative body size", key: "COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE", value: "-1", err: "server.max_request_body_size must be positive, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(minimal), env(map[string]string{tt.key: tt.value}))
			assert.EqualError(t, err, tt.err)
		})
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE", config.EnvName("server.max_request_body_size"))
	assert.Equal(t, "COORDINATOR_LOG_LEVEL", config.EnvName("log_level"))
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := config.Load("testdata/does-not-exist.yaml", nil)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "reading config: "), err.Error())
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestLoadNamesFile(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/bad.yaml"
	require.NoError(t, os.WriteFile(path, []byte(minimal+"log_level: 0\n"), 0o600))
	_, err := config.Load(path, nil)
	assert.EqualError(t, err, "config "+path+": log_level: must be between 1 and 5, got 0")
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		err  string
	}{
		// Validation.
		{name: "log level low", yaml: minimal + "log_level: 0", err: "log_level: must be between 1 and 5, got 0"},
		{name: "log level high", yaml: minimal + "log_level: 6", err: "log_level: must be between 1 and 5, got 6"},
		{name: "listen addr", yaml: minimal + "server: {listen_addr: ''}", err: "server.listen_addr: required"},
		{name: "grpc listen addr", yaml: minimal + "server: {grpc_listen_addr: ''}", err: "server.grpc_listen_addr: required"},
		{name: "read timeout zero", yaml: minimal + "server: {read_timeout: 0s}", err: "server.read_timeout: must be positive, got 0s"},
		{name: "write timeout negative", yaml: minimal + "server: {write_timeout: -1s}", err: "server.write_timeout: must be positive, got -1s"},
		{name: "shutdown timeout zero", yaml: minimal + "server: {shutdown_timeout: 0s}", err: "server.shutdown_timeout: must be positive, got 0s"},
		{name: "body size negative", yaml: minimal + "server: {max_request_body_size: -1}", err: "server.max_request_body_size must be positive, got -1"},
		{name: "body size too big", yaml: minimal + "server: {max_request_body_size: 8796093022208}", err: "server.max_request_body_size must be at most 8796093022207, got 8796093022208"},
		{name: "gateway address missing", yaml: "log_level: 2", err: "gateway.address: required"},
		{name: "gateway address empty", yaml: "gateway: {address: ''}", err: "gateway.address: required"},
		{name: "gateway address without scheme", yaml: "gateway: {address: 'inference-gateway:80'}", err: `gateway.address: must be an http(s) URL with a host, got "inference-gateway:80"`},
		{name: "gateway address other scheme", yaml: "gateway: {address: 'ftp://gw'}", err: `gateway.address: must be an http(s) URL with a host, got "ftp://gw"`},
		{name: "gateway address without host", yaml: "gateway: {address: 'http://:80'}", err: `gateway.address: must be an http(s) URL with a host, got "http://:80"`},
		{name: "gateway address path only", yaml: "gateway: {address: '/v1'}", err: `gateway.address: must be an http(s) URL with a host, got "/v1"`},
		{name: "gateway address unparsable", yaml: "gateway: {address: 'http://gw:port'}", err: `gateway.address: must be an http(s) URL with a host, got "http://gw:port"`},
		{name: "gateway address only a slash", yaml: "gateway: {address: 'http:///'}", err: `gateway.address: must be an http(s) URL with a host, got "http://"`},
		{name: "idle conns negative", yaml: minimal + "  max_idle_conns_per_host: -1", err: "gateway.max_idle_conns_per_host: must not be negative, got -1"},
		{name: "idle conn timeout zero", yaml: minimal + "  idle_conn_timeout: 0s", err: "gateway.idle_conn_timeout: must be positive, got 0s"},
		{name: "gateway timeout zero", yaml: minimal + "  timeout: 0s", err: "gateway.timeout: must be positive, got 0s"},
		{name: "connect timeout zero", yaml: minimal + "  connect_timeout: 0s", err: "gateway.connect_timeout: must be positive, got 0s"},
		{name: "stream idle negative", yaml: minimal + "  stream_idle_timeout: -1s", err: "gateway.stream_idle_timeout: must not be negative, got -1s"},
		{name: "retry attempts negative", yaml: minimal + "  retry: {max_attempts: -1}", err: "gateway.retry.max_attempts: must not be negative, got -1"},
		{name: "retry backoff inverted", yaml: minimal + "  retry: {initial_backoff: 2s, max_backoff: 1s}", err: "gateway.retry.max_backoff: must not be below initial_backoff (2s), got 1s"},
		{name: "header bytes small", yaml: minimal + "server: {max_header_bytes: 10}", err: "server.max_header_bytes: must be at least 1024, got 10"},
		{name: "concurrent requests negative", yaml: minimal + "server: {max_concurrent_requests: -1}", err: "server.max_concurrent_requests: must not be negative, got -1"},
		{name: "stream write timeout zero", yaml: minimal + "server: {stream_write_timeout: 0s}", err: "server.stream_write_timeout: must be positive, got 0s"},
		{name: "step without type", yaml: minimal + "pipeline:\n  steps:\n    - type: render\n    - params: {a: 1}", err: "pipeline.steps[1].type: required"},
		{
			name: "tokens-in without render",
			yaml: minimal + "pipeline:\n  use_openai_format: false\n  steps:\n    - type: prefill\n    - type: decode",
			err:  `pipeline.use_openai_format=false requires a "render" step (the tokens-in format sends token IDs that render produces)`,
		},

		// Decoding.
		{name: "tracing protocol", yaml: minimal + "tracing: {enabled: true, protocol: zipkin}", err: `tracing.protocol: must be "grpc" or "http/protobuf", got "zipkin"`},
		{name: "tracing endpoint", yaml: minimal + `tracing: {endpoint: "http://"}`, err: `tracing.endpoint: must be a URL with a host or host:port, got "http://"`},
		{name: "tracing sample ratio", yaml: minimal + "tracing: {sample_ratio: 1.5}", err: "tracing.sample_ratio: must be between 0 and 1, got 1.5"},
		{name: "unknown root key", yaml: minimal + "bogus: 1", err: `unknown key "bogus" (known: gateway, log_level, pipeline, server, tracing)`},
		{name: "pipeline key at the root", yaml: minimal + "use_openai_format: false", err: `unknown key "use_openai_format" (known: gateway, log_level, pipeline, server, tracing)`},
		{name: "unknown server key", yaml: minimal + "server: {listen: ':1'}", err: `server: unknown key "listen" (known: grpc_listen_addr, grpc_tls, listen_addr, max_concurrent_requests, max_concurrent_streams, max_header_bytes, max_request_body_size, read_header_timeout, read_timeout, retry_after, shutdown_timeout, stream_write_timeout, tls, write_timeout)`},
		{name: "unknown step key", yaml: minimal + "pipeline:\n  steps:\n    - type: render\n      parms: {}", err: `pipeline.steps[0]: unknown key "parms" (known: params, type)`},
		{name: "fractional int", yaml: minimal + "server: {max_request_body_size: 64.5}", err: "server.max_request_body_size: expected integer, got 64.5"},
		{name: "string for int", yaml: minimal + "log_level: '3'", err: "log_level: expected number, got string"},
		{name: "number for duration", yaml: minimal + "server: {read_timeout: 30}", err: `server.read_timeout: expected a duration string like "30s", got 30`},
		{name: "string for bool", yaml: minimal + "pipeline: {use_openai_format: 'false'}", err: "pipeline.use_openai_format: expected bool, got string"},
		{name: "int for string", yaml: "gateway: {address: 80}", err: "gateway.address: expected string, got int"},
		{name: "section not a map", yaml: minimal + "server: 8080", err: "server: expected a map, got int"},
		{name: "steps not a list", yaml: minimal + "pipeline: {steps: render}", err: "pipeline.steps: expected a list, got string"},
		{name: "params not a map", yaml: minimal + "pipeline:\n  steps:\n    - type: render\n      params: [1]", err: "pipeline.steps[0].params: expected a map, got list"},
		{name: "step type not a string", yaml: minimal + "pipeline:\n  steps:\n    - type: 3", err: "pipeline.steps[0].type: expected string, got int"},
		{name: "top level list", yaml: "- a\n- b\n", err: "expected a map of keys at the top level, got a list"},
		{name: "top level scalar", yaml: "hello\n", err: "expected a map of keys at the top level, got a scalar"},
		{name: "yaml syntax", yaml: "server:\n  listen_addr: ':1'\n bad", err: "yaml: line 2: did not find expected key"},
		{name: "duplicate key", yaml: minimal + "log_level: 2\nlog_level: 3\n", err: `yaml: line 4: mapping key "log_level" already defined at line 3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.yaml), nil)
			assert.EqualError(t, err, tt.err)
		})
	}
}

func TestParseNumericForms(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte(minimal+"log_level: 3.0\nserver: {max_request_body_size: 64.0}\n"), nil)
	require.NoError(t, err)
	assert.Equal(t, 3, got.LogLevel)
	assert.Equal(t, 64, got.Server.MaxRequestBodySize)
}

func TestParseGatewayAddress(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{in: "http://gw:80", want: "http://gw:80"},
		{in: "http://gw:80/", want: "http://gw:80"},
		{in: "https://gw.example/prefix/", want: "https://gw.example/prefix"},
		{in: "http://10.0.0.1", want: "http://10.0.0.1"},
		{in: "http://[::1]:8000", want: "http://[::1]:8000"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := config.Parse([]byte("gateway: {address: '"+tt.in+"'}"), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Gateway.Address)
		})
	}
}

func TestParseStepParams(t *testing.T) {
	t.Parallel()
	doc := minimal + `
pipeline:
  steps:
    - type: replace-media-urls
      params:
        download_timeout: 10s
        max_concurrent_downloads: 10
        ratio: 0.5
        allow_private_networks: true
        allowed_domains: [a.example, b.example]
        nested: {x: 1, 2: two}
        empty:
    - type: render
      params:
    - type: decode
`
	got, err := config.Parse([]byte(doc), nil)
	require.NoError(t, err)
	require.Len(t, got.Pipeline.Steps, 3)
	assert.Equal(t, map[string]any{
		"download_timeout":         "10s",
		"max_concurrent_downloads": 10,
		"ratio":                    0.5,
		"allow_private_networks":   true,
		"allowed_domains":          []any{"a.example", "b.example"},
		"nested":                   map[string]any{"x": 1, "2": "two"},
		"empty":                    nil,
	}, got.Pipeline.Steps[0].Params)
	for _, s := range got.Pipeline.Steps[1:] {
		assert.NotNil(t, s.Params, s.Type)
		assert.Empty(t, s.Params, s.Type)
	}
}

func TestPipelineValidate(t *testing.T) {
	t.Parallel()
	const renderErr = `pipeline.use_openai_format=false requires a "render" step (the tokens-in format sends token IDs that render produces)`
	steps := func(types ...string) []config.Step {
		var out []config.Step
		for _, typ := range types {
			out = append(out, config.Step{Type: typ, Params: map[string]any{}})
		}
		return out
	}
	tests := []struct {
		name     string
		pipeline config.Pipeline
		err      string
	}{
		{name: "openai format without render", pipeline: config.Pipeline{UseOpenAIFormat: true, Steps: steps("prefill", "decode")}},
		{name: "tokens-in with render", pipeline: config.Pipeline{UseOpenAIFormat: false, Steps: steps("render", "prefill", "decode")}},
		{name: "tokens-in without render", pipeline: config.Pipeline{UseOpenAIFormat: false, Steps: steps("prefill", "decode")}, err: renderErr},
		{name: "tokens-in without steps", pipeline: config.Pipeline{}, err: renderErr},
		{name: "openai format without steps", pipeline: config.Pipeline{UseOpenAIFormat: true}},
		{name: "blank step type", pipeline: config.Pipeline{UseOpenAIFormat: true, Steps: steps("render", " ")}, err: "pipeline.steps[1].type: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.pipeline.Validate()
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.err)
		})
	}
}

func TestParseTokensInWithRender(t *testing.T) {
	t.Parallel()
	got, err := config.Parse([]byte(minimal+"pipeline:\n  use_openai_format: false\n  steps:\n    - type: render\n      params: {address: 'http://r'}\n    - type: decode\n"), nil)
	require.NoError(t, err)
	assert.False(t, got.Pipeline.UseOpenAIFormat)
}

func TestMaxRequestBodyBytes(t *testing.T) {
	t.Parallel()
	const most = (math.MaxInt64 - 1) / (1 << 20)
	tests := []struct {
		mb   int
		want int64
	}{
		{mb: 0, want: 64 << 20},
		{mb: 1, want: 1 << 20},
		{mb: 64, want: 64 << 20},
		{mb: most, want: most << 20},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, config.Server{MaxRequestBodySize: tt.mb}.MaxRequestBodyBytes(), "%d MB", tt.mb)
	}
	assert.LessOrEqual(t, config.Server{MaxRequestBodySize: most}.MaxRequestBodyBytes(), int64(math.MaxInt64-1))

	got, err := config.Parse([]byte(minimal+"server: {max_request_body_size: 8796093022207}"), nil)
	require.NoError(t, err, "the largest size is accepted")
	assert.Equal(t, int64(most)<<20, got.Server.MaxRequestBodyBytes())
}
