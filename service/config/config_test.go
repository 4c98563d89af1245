package config_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/service/config"
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
	s.MemoryBudgetWait = 250 * time.Millisecond
	return s
}

// withGatewayExtensions sets our gateway keys to their defaults.
func withGatewayExtensions(g config.Gateway) config.Gateway {
	g.ConnectTimeout = 10 * time.Second
	g.StreamIdleTimeout = 120 * time.Second
	g.Retry = gateway.Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	g.UserAgent = "coordinator"
	g.Transport = "h1"
	g.MaxAnswerSize = 256
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
			SessionHeader:   "x-session-id",
			VersionPolicy:   "any",
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
		Tracing:   config.Default().Tracing,
		Control:   config.Default().Control,
		Responses: config.Default().Responses,
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
		Pipeline: config.Pipeline{UseOpenAIFormat: true, SessionHeader: "x-session-id", VersionPolicy: "any"},
		// Tracing keys left unset: the OTEL_* variables decide (service/tracing.go).
		Tracing: config.Tracing{},
		// The control plane off, with its defaults for when it is turned on.
		Control: config.Control{
			CallTimeout: 5 * time.Minute, StateTimeout: 5 * time.Second, Concurrency: 64,
			Hold:       config.Hold{MaxWait: time.Minute, MaxRequests: 1024},
			Membership: config.Membership{RefreshInterval: 10 * time.Second},
		},
		// Responses stored in memory, as OpenAI stores them unless told not to.
		Responses: config.Responses{
			Store:          config.ResponseStore{Backend: "memory", TTL: 720 * time.Hour, MaxBytes: 256, MaxEntries: 100000},
			StoreByDefault: true, MaxHistoryBytes: 8 << 20,
		},
	}, config.Default(), "the defaults of compat §2.2, tracing off and the control plane off")
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

func TestMemoryBudgetBytes(t *testing.T) {
	t.Parallel()
	derived := func() int64 { return 900 << 20 }
	assert.EqualValues(t, 900<<20, config.Server{}.MemoryBudgetBytes(derived), "0: derived")
	assert.EqualValues(t, 0, config.Server{MemoryBudget: -1}.MemoryBudgetBytes(derived), "negative: off")
	assert.EqualValues(t, 512<<20, config.Server{MemoryBudget: 512}.MemoryBudgetBytes(derived))
	assert.EqualValues(t, 256<<20, config.Gateway{}.MaxAnswerBytes())
	assert.EqualValues(t, 8<<20, config.Gateway{MaxAnswerSize: 8}.MaxAnswerBytes())
}
