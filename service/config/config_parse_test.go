package config_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/service/config"
)

// Parsing: errors, number forms, the gateway address, step parameters and
// the pipeline's rules.

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
		{name: "gateway transport", yaml: minimal + "  transport: h2", err: `gateway.transport: must be "h1" or "net/http", got "h2"`},
		{name: "stream idle negative", yaml: minimal + "  stream_idle_timeout: -1s", err: "gateway.stream_idle_timeout: must not be negative, got -1s"},
		{name: "retry attempts negative", yaml: minimal + "  retry: {max_attempts: -1}", err: "gateway.retry.max_attempts: must not be negative, got -1"},
		{name: "retry backoff inverted", yaml: minimal + "  retry: {initial_backoff: 2s, max_backoff: 1s}", err: "gateway.retry.max_backoff: must not be below initial_backoff (2s), got 1s"},
		{name: "trusted EPP-Profile", yaml: minimal + "server: {trusted_routing_headers: [x-llm-d-slo-ttft-ms, EPP-Profile]}",
			err: `server.trusted_routing_headers[1]: "EPP-Profile" is not a routing header a client may be trusted with (x-gateway-*, x-llm-d-*, x-*-host-port, x-data-parallel-rank)`},
		{name: "trusted non-routing header", yaml: minimal + "server: {trusted_routing_headers: [x-request-id]}",
			err: `server.trusted_routing_headers[0]: "x-request-id" is not a routing header a client may be trusted with (x-gateway-*, x-llm-d-*, x-*-host-port, x-data-parallel-rank)`},
		{name: "trusted not a list", yaml: minimal + "server: {trusted_routing_headers: x-llm-d-slo-ttft-ms}", err: "server.trusted_routing_headers: expected a list of strings, got string"},
		{name: "user agent not ASCII", yaml: "gateway: {address: 'http://gw:80', user_agent: \"caf\u00e9\"}", err: `gateway.user_agent: must be printable ASCII, got "café"`},
		{name: "header bytes small", yaml: minimal + "server: {max_header_bytes: 10}", err: "server.max_header_bytes: must be at least 1024, got 10"},
		{name: "concurrent requests negative", yaml: minimal + "server: {max_concurrent_requests: -1}", err: "server.max_concurrent_requests: must not be negative, got -1"},
		{name: "memory budget wait negative", yaml: minimal + "server: {memory_budget_wait: -1s}", err: "server.memory_budget_wait: must not be negative, got -1s"},
		{name: "memory budget too big", yaml: minimal + "server: {memory_budget: 8796093022208}", err: "server.memory_budget: must be at most 8796093022207, got 8796093022208"},
		{name: "answer size negative", yaml: minimal + "  max_answer_size: -1", err: "gateway.max_answer_size: must be between 0 and 8796093022207, got -1"},
		{name: "stream write timeout zero", yaml: minimal + "server: {stream_write_timeout: 0s}", err: "server.stream_write_timeout: must be positive, got 0s"},
		{name: "step without type", yaml: minimal + "pipeline:\n  steps:\n    - type: render\n    - params: {a: 1}", err: "pipeline.steps[1].type: required"},
		{
			name: "tokens-in without render",
			yaml: minimal + "pipeline:\n  use_openai_format: false\n  steps:\n    - type: prefill\n    - type: decode",
			err:  `pipeline.use_openai_format=false requires a "render" step (the tokens-in format sends token IDs that render produces)`,
		},

		{name: "control role", yaml: minimal + "control:\n  membership:\n    static:\n      - {role: Decode, address: '10.0.0.1:8000'}", err: `control.membership.static[0].role: unknown role "Decode" (known: encode, prefill, decode)`},
		{name: "control address", yaml: minimal + "control:\n  membership:\n    static:\n      - {role: decode, address: '10.0.0.1'}", err: `control.membership.static[0].address: must be host:port, got "10.0.0.1"`},
		{name: "control dns port", yaml: minimal + "control:\n  membership:\n    dns:\n      - {role: decode, name: vllm-decode, port: 0}", err: "control.membership.dns[0].port: must be in 1..65535, got 0"},
		{name: "control dns name", yaml: minimal + "control:\n  membership:\n    dns:\n      - {role: decode, port: 8000}", err: "control.membership.dns[0].name: required"},
		{name: "control concurrency", yaml: minimal + "control: {concurrency: 0}", err: "control.concurrency: must be at least 1, got 0"},
		{name: "control hold wait", yaml: minimal + "control: {hold: {max_wait: 0s}}", err: "control.hold.max_wait: must be positive, got 0s"},
		{name: "control token without listener", yaml: minimal + "control: {token_file: /x}", err: "control.tls and control.token_file need control.listen_addr"},

		{name: "version policy", yaml: minimal + "pipeline: {version_policy: latest}", err: `pipeline.version_policy: must be "any" or "consistent", got "latest"`},
		{name: "dp size", yaml: minimal + "pipeline: {dp_size: -1}", err: "pipeline.dp_size: must be between 0 and 4096, got -1"},
		{name: "session header owned", yaml: minimal + "pipeline: {session_header: x-data-parallel-rank}", err: `pipeline.session_header: must name a header the legs receive, got "x-data-parallel-rank"`},

		// Decoding.
		{name: "tracing protocol", yaml: minimal + "tracing: {enabled: true, protocol: zipkin}", err: `tracing.protocol: must be "grpc" or "http/protobuf", got "zipkin"`},
		{name: "tracing endpoint", yaml: minimal + `tracing: {endpoint: "http://"}`, err: `tracing.endpoint: must be a URL with a host or host:port, got "http://"`},
		{name: "tracing sample ratio", yaml: minimal + "tracing: {sample_ratio: 1.5}", err: "tracing.sample_ratio: must be between 0 and 1, got 1.5"},
		{name: "responses backend", yaml: minimal + "responses: {store: {backend: disk}}", err: `responses.store.backend: unknown backend "disk" (known: memory, off, redis)`},
		{name: "responses redis url", yaml: minimal + "responses: {store: {backend: redis}}", err: "responses.store.redis_url: required by backend redis"},
		{name: "responses history", yaml: minimal + "responses: {max_history_bytes: 0}", err: "responses.max_history_bytes: must be at least 1, got 0"},
		{name: "responses tenant header", yaml: minimal + "responses: {tenant_header: 'a b'}", err: `responses.tenant_header: not a header name: "a b"`},
		{name: "unknown root key", yaml: minimal + "bogus: 1", err: `unknown key "bogus" (known: control, gateway, log_level, pipeline, responses, server, tracing)`},
		{name: "pipeline key at the root", yaml: minimal + "use_openai_format: false", err: `unknown key "use_openai_format" (known: control, gateway, log_level, pipeline, responses, server, tracing)`},
		{name: "unknown server key", yaml: minimal + "server: {listen: ':1'}", err: `server: unknown key "listen" (known: client_request_id_on_legs, grpc_listen_addr, grpc_tls, listen_addr, max_concurrent_requests, max_concurrent_streams, max_content_blocks, max_header_bytes, max_json_nodes, max_messages, max_request_body_size, memory_budget, memory_budget_wait, read_header_timeout, read_timeout, retry_after, shutdown_timeout, stream_write_timeout, tls, trust_client_transfer_params, trusted_routing_headers, write_timeout)`},
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
