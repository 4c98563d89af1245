// Package config is the coordinator's root config file: the reference
// coordinator's YAML format (compat §2.2), COORDINATOR_* environment
// overrides, defaults and startup validation.
//
// Each step's params stay a raw map here; a step decodes its own with
// internal/params in its constructor. config/coordinator/coordinator.yaml is the annotated
// sample that documents every key.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
)

// Config is the whole config file. Keys are the `param` tags; every scalar key
// can be overridden by the environment variable named in its doc
// (see EnvPrefix).
type Config struct {
	// LogLevel is the log verbosity: 1 warning, 2 info, 3 verbose, 4 debug,
	// 5 trace (logs redacted leg bodies). Key log_level, default 2,
	// env COORDINATOR_LOG_LEVEL. The -v flag wins when given.
	LogLevel int `param:"log_level"`
	// Server is the inbound listeners.
	Server Server `param:"server"`
	// Gateway is the outbound client to the Inference Gateway.
	Gateway Gateway `param:"gateway"`
	// Pipeline is the ordered list of steps run for every request.
	Pipeline Pipeline `param:"pipeline"`
	// Tracing exports OpenTelemetry traces (coordinator extension).
	Tracing Tracing `param:"tracing"`
	// Control is the RL control plane (coordinator extension).
	Control Control `param:"control"`
	// Responses is the stored OpenAI Responses (coordinator extension).
	Responses Responses `param:"responses"`
}

// Tracing configures OpenTelemetry tracing: a span per request, per step
// and per leg, exported with OTLP. Off by default, and free when off.
//
// Each key means what its OpenTelemetry environment variable means (named
// in its doc) and wins over it; a key left unset leaves the variable, then
// the OpenTelemetry default, in charge (service/tracing.go resolves them).
type Tracing struct {
	// Enabled turns tracing on. Key tracing.enabled, default false; unset,
	// OTEL_TRACES_EXPORTER=otlp turns it on too.
	Enabled bool `param:"enabled"`
	// Protocol is the OTLP transport: "grpc" or "http/protobuf" ("http"
	// is taken for it). Key tracing.protocol; unset:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else
	// grpc.
	Protocol string `param:"protocol"`
	// Endpoint is the collector's base URL, OTEL_EXPORTER_OTLP_ENDPOINT's
	// twin: over http/protobuf "/v1/traces" is appended to its path (a URL
	// that already ends in /v1/traces is used as it is); grpc takes a URL
	// or host:port. Key tracing.endpoint; unset: the environment, else
	// localhost:4317 (grpc) or http://localhost:4318/v1/traces.
	Endpoint string `param:"endpoint"`
	// TracesEndpoint is the full URL spans are sent to, used as given,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's twin; it wins over Endpoint.
	// Key tracing.traces_endpoint.
	TracesEndpoint string `param:"traces_endpoint"`
	// Insecure sends without TLS to a host:port endpoint (a URL's scheme
	// decides for itself), OTEL_EXPORTER_OTLP_INSECURE's twin. Key
	// tracing.insecure, default false.
	Insecure bool `param:"insecure"`
	// Headers are sent with every export (an API key),
	// OTEL_EXPORTER_OTLP_HEADERS's twin. Key tracing.headers, a map of
	// names to values; not settable by COORDINATOR_* variables.
	Headers map[string]string `param:"headers"`
	// Timeout bounds one export, OTEL_EXPORTER_OTLP_TIMEOUT's twin. Key
	// tracing.timeout; unset: the environment, else 10s.
	Timeout time.Duration `param:"timeout"`
	// SampleRatio is the share of new traces sampled, 0 to 1; a request
	// that arrives with a traceparent follows its sampled flag. Setting it
	// means OTEL_TRACES_SAMPLER=parentbased_traceidratio with
	// OTEL_TRACES_SAMPLER_ARG=SampleRatio. Key tracing.sample_ratio;
	// unset: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else
	// parentbased_always_on.
	SampleRatio *float64 `param:"sample_ratio"`
	// ServiceName is the service.name resource attribute,
	// OTEL_SERVICE_NAME's twin. Key tracing.service_name; unset:
	// OTEL_SERVICE_NAME, then service.name in OTEL_RESOURCE_ATTRIBUTES
	// (whose other attributes always apply), else "coordinator".
	ServiceName string `param:"service_name"`
}

// Server configures the inbound HTTP (REST, SSE) and gRPC listeners.
type Server struct {
	// ListenAddr is the HTTP listen address. Key server.listen_addr,
	// default ":8080".
	ListenAddr string `param:"listen_addr"`
	// GRPCListenAddr is the gRPC listen address (coordinator extension).
	// Key server.grpc_listen_addr, default ":9090".
	GRPCListenAddr string `param:"grpc_listen_addr"`
	// ReadTimeout bounds reading a whole request, body included.
	// Key server.read_timeout, default 30s.
	ReadTimeout time.Duration `param:"read_timeout"`
	// WriteTimeout bounds writing a whole response; it is lifted for
	// streaming requests. Key server.write_timeout, default 120s.
	WriteTimeout time.Duration `param:"write_timeout"`
	// ShutdownTimeout bounds the drain on SIGINT/SIGTERM.
	// Key server.shutdown_timeout, default 25s.
	ShutdownTimeout time.Duration `param:"shutdown_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers (slowloris).
	// Key server.read_header_timeout, default 10s.
	ReadHeaderTimeout time.Duration `param:"read_header_timeout"`
	// MaxHeaderBytes caps a request's header block, in bytes; larger gets
	// 431. Key server.max_header_bytes, default 262144 (256 KiB).
	MaxHeaderBytes int `param:"max_header_bytes"`
	// StreamWriteTimeout bounds each write of a streamed answer to the
	// client: a reader that takes longer has its stream ended and its legs
	// cancelled. Key server.stream_write_timeout, default 30s.
	StreamWriteTimeout time.Duration `param:"stream_write_timeout"`
	// MaxConcurrentRequests caps the requests in flight across REST and
	// gRPC (streams included); past it a request gets 429 (gRPC
	// RESOURCE_EXHAUSTED) with Retry-After. Key
	// server.max_concurrent_requests, default 4096, 0 means no limit.
	MaxConcurrentRequests int `param:"max_concurrent_requests"`
	// MaxConcurrentStreams caps the streaming requests in flight, within
	// MaxConcurrentRequests. Key server.max_concurrent_streams, default
	// 2048, 0 means no limit.
	MaxConcurrentStreams int `param:"max_concurrent_streams"`
	// RetryAfter is the wait a refused (429, or 503 while shutting down)
	// client is told, in whole seconds rounded up. Key server.retry_after,
	// default 1s.
	RetryAfter time.Duration `param:"retry_after"`
	// MaxRequestBodySize caps a request body, in megabytes (MiB); larger
	// bodies get 413. Key server.max_request_body_size, default 64 (0 means
	// the default), env COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE.
	MaxRequestBodySize int `param:"max_request_body_size"`
	// MaxMessages bounds a chat or Messages body's messages and a
	// Responses body's input items, counted as the body is parsed (400
	// past it; coordinator extension). Key server.max_messages, default
	// 65536 (0 means the default), env COORDINATOR_SERVER_MAX_MESSAGES.
	MaxMessages int `param:"max_messages"`
	// MaxContentBlocks bounds the content parts of a body's messages
	// together, as MaxMessages. Key server.max_content_blocks, default
	// 131072 (0 means the default), env
	// COORDINATOR_SERVER_MAX_CONTENT_BLOCKS.
	MaxContentBlocks int `param:"max_content_blocks"`
	// MaxJSONNodes bounds the JSON values of a body of any endpoint at
	// any depth, token IDs included, as MaxMessages. Key
	// server.max_json_nodes, default 16777216 (0 means the default), env
	// COORDINATOR_SERVER_MAX_JSON_NODES.
	MaxJSONNodes int `param:"max_json_nodes"`
	// MemoryBudget is the process's memory budget, in megabytes (MiB):
	// what request bodies, their parse, downloaded media and buffered
	// answers may hold at once, across REST and gRPC. A request that
	// cannot get its share within MemoryBudgetWait gets 429 (gRPC
	// RESOURCE_EXHAUSTED) with Retry-After, one that can never fit 413.
	// Key server.memory_budget, default 0: half the process's memory limit
	// (the smallest of GOMEMLIMIT, the container's limit and the machine's
	// memory; membudget.DefaultLimit); a negative value turns it off. env
	// COORDINATOR_SERVER_MEMORY_BUDGET.
	MemoryBudget int `param:"memory_budget"`
	// MemoryBudgetWait is how long a request waits for its share of the
	// memory budget before it is refused. Key server.memory_budget_wait,
	// default 250ms, 0 refuses at once. env
	// COORDINATOR_SERVER_MEMORY_BUDGET_WAIT.
	MemoryBudgetWait time.Duration `param:"memory_budget_wait"`
	// TrustClientTransferParams passes a client's own kv_transfer_params
	// and ec_transfer_params (top level, under vllm_xargs and under
	// sampling_params.extra_args) on to the legs, as the reference does
	// (coordinator extension, compat D23). Off, the default: the
	// coordinator owns them, removes a client's before any step, logs the
	// request at info and counts it in
	// coordinator_client_transfer_params_dropped_total. Key
	// server.trust_client_transfer_params, default false, env
	// COORDINATOR_SERVER_TRUST_CLIENT_TRANSFER_PARAMS.
	TrustClientTransferParams bool `param:"trust_client_transfer_params"`
	// ClientRequestIDOnLegs sends a client's x-request-id (or gRPC
	// request_id) on every leg exactly as the client sent it, as the
	// reference does. Off, the default (compat D25): the client's id stays
	// on the answer and in the logs, and the legs of each request carry an
	// id unique to it, the client's id (cut to leave room) then '-' and 16
	// random hex digits, so two requests in flight with one client id never
	// share a KV hand-off (the id names it: NIXL's remote_request_id). Ids
	// the coordinator makes itself are unique and go on as they are. Key
	// server.client_request_id_on_legs, default false, env
	// COORDINATOR_SERVER_CLIENT_REQUEST_ID_ON_LEGS.
	ClientRequestIDOnLegs bool `param:"client_request_id_on_legs"`
	// TrustedRoutingHeaders are the routing headers a client may set after
	// all (coordinator extension, compat D24): by default the coordinator
	// owns the routing namespace (x-gateway-*, x-llm-d-*, x-*-host-port,
	// x-data-parallel-rank, EPP-Profile, Prefer), removes a client's from
	// every leg, the render service and the passthrough, logs the request
	// at info and counts it in
	// coordinator_client_routing_headers_dropped_total. Each name listed
	// (any case) reaches the legs as the client sent it: for a trusted
	// tier that sets llm-d's SLO headers (x-llm-d-slo-ttft-ms, ...).
	// EPP-Profile and Prefer, which each leg sets itself, cannot be
	// listed, nor a header outside the namespace. Key
	// server.trusted_routing_headers, a list of names, default empty; not
	// settable by COORDINATOR_* variables.
	TrustedRoutingHeaders []string `param:"trusted_routing_headers"`
	// TLS serves the REST listener over TLS (HTTP/2 by ALPN), with mutual
	// TLS when client_auth asks for it (coordinator extension). Keys
	// server.tls.{cert_file,key_file,client_ca_file,client_auth}; absent:
	// plaintext (HTTP/1.1 and h2c).
	TLS tlsfiles.ServerConfig `param:"tls"`
	// GRPCTLS is TLS for the gRPC listener, same keys (coordinator
	// extension). Key server.grpc_tls; absent: the gRPC listener uses
	// server.tls.
	GRPCTLS tlsfiles.ServerConfig `param:"grpc_tls"`
}

// Gateway configures the HTTP client the phase steps use to reach the
// Inference Gateway.
type Gateway struct {
	// Address is the gateway's base URL; request paths are appended to it
	// verbatim. Required; an http(s) URL with a host; one trailing "/" is
	// dropped. Key gateway.address.
	Address string `param:"address"`
	// MaxIdleConnsPerHost caps the keep-alive pool.
	// Key gateway.max_idle_conns_per_host, default 100.
	MaxIdleConnsPerHost int `param:"max_idle_conns_per_host"`
	// IdleConnTimeout is how long an idle keep-alive connection lives.
	// Key gateway.idle_conn_timeout, default 90s.
	IdleConnTimeout time.Duration `param:"idle_conn_timeout"`
	// Timeout is the response-header timeout of each outbound call; body
	// streaming is not bounded by it. Key gateway.timeout, default 60s.
	Timeout time.Duration `param:"timeout"`
	// ConnectTimeout bounds opening a connection (dial and TLS handshake).
	// Key gateway.connect_timeout, default 10s (coordinator extension).
	ConnectTimeout time.Duration `param:"connect_timeout"`
	// StreamIdleTimeout bounds the silence between two reads of a leg's
	// answer body (between stream events): a worker that stops sending is
	// cut, one that keeps sending never is. Key gateway.stream_idle_timeout,
	// default 120s, 0 means no bound (coordinator extension).
	StreamIdleTimeout time.Duration `param:"stream_idle_timeout"`
	// MaxAnswerSize caps a worker's buffered (not streamed) decode or
	// conditional-decode answer, in megabytes (MiB); past it the client
	// gets 502 naming the cap and the leg's connection is closed. Streamed
	// answers are not buffered (each event is capped instead). Key
	// gateway.max_answer_size, default 256 (0 means the default), env
	// COORDINATOR_GATEWAY_MAX_ANSWER_SIZE (coordinator extension).
	MaxAnswerSize int `param:"max_answer_size"`
	// Retry is the policy of the legs that are safe to send again
	// (encode, prefill): keys gateway.retry.{max_attempts,initial_backoff,
	// max_backoff}, default 3 attempts, 50ms, 1s (coordinator extension).
	Retry gateway.Retry `param:"retry"`
	// Transport is the client transport of a plain-http address: "h1"
	// (the coordinator's own, each leg on its caller's goroutine) or
	// "net/http" (Go's Transport, two goroutines a connection); "" means
	// "h1". An https address always uses net/http's. Key
	// gateway.transport, default "h1", env COORDINATOR_GATEWAY_TRANSPORT
	// (coordinator extension).
	Transport string `param:"transport"`
	// TLS is the https client's CAs, client certificate (mutual TLS) and
	// server name (coordinator extension). Keys
	// gateway.tls.{ca_file,cert_file,key_file,server_name,insecure_skip_verify};
	// only with an https address; absent: Go's defaults.
	TLS tlsfiles.ClientConfig `param:"tls"`
	// UserAgent is the User-Agent of the legs of a request whose client
	// sent none (coordinator extension): a leg carries the client's own,
	// a gRPC client's without the "grpc-go/…" product grpc-go appends.
	// Key gateway.user_agent, default "coordinator" (also when empty), env
	// COORDINATOR_GATEWAY_USER_AGENT.
	UserAgent string `param:"user_agent"`
}

// Pipeline is the ordered list of steps and the pipeline-wide values the
// builder injects into each step's params when the step does not set them.
type Pipeline struct {
	// KVConnector names the KV transfer connector (kv-nixl,
	// kv-shared-storage, kv-sglang); empty means the steps' default,
	// kv-shared-storage. Key pipeline.kv_connector.
	KVConnector string `param:"kv_connector"`
	// ECConnector names the EC transfer connector (ec-nixl,
	// ec-shared-storage); empty means ec-shared-storage.
	// Key pipeline.ec_connector.
	ECConnector string `param:"ec_connector"`
	// UseOpenAIFormat selects the encode and prefill wire format: true posts
	// on the client's OpenAI path, false on /inference/v1/generate with the
	// token IDs render produced. Key pipeline.use_openai_format, default
	// true, env COORDINATOR_PIPELINE_USE_OPENAI_FORMAT.
	UseOpenAIFormat bool `param:"use_openai_format"`
	// Steps run in this order. Key pipeline.steps; not settable by env.
	Steps []Step `param:"steps"`
	// DPSize pins each request's prefill and decode legs to one
	// data-parallel rank of engines of this many ranks: X-data-parallel-rank
	// is the hash of its session id (SessionHeader) or, without one, its
	// request id, modulo DPSize, so both legs and every turn of a session
	// meet on one rank (coordinator extension). Key pipeline.dp_size,
	// default 0 (not pinned; 1 is the same), env COORDINATOR_PIPELINE_DP_SIZE.
	DPSize int `param:"dp_size"`
	// SessionHeader names the header that carries a request's session id
	// (the llm-d EPP's session affinity reads the same; gRPC: the call
	// metadata of that name). Key pipeline.session_header, default
	// "x-session-id", env COORDINATOR_PIPELINE_SESSION_HEADER.
	SessionHeader string `param:"session_header"`
	// VersionPolicy decides what a tokens answer whose prefill and decode
	// ran on different weight versions becomes (both read from the
	// workers' weight_versions): "any" serves it (counted, the prefill's
	// version in x-prefill-weight-version), "consistent" ends it with a
	// retryable UNAVAILABLE naming both. Key pipeline.version_policy,
	// default "any", env COORDINATOR_PIPELINE_VERSION_POLICY (coordinator
	// extension).
	VersionPolicy string `param:"version_policy"`
}

// The pipeline.version_policy values.
const (
	VersionPolicyAny        = "any"
	VersionPolicyConsistent = "consistent"
)

// Step is one pipeline entry: a step type and its params.
type Step struct {
	// Type is the step's config name, e.g. "render". Required.
	Type string `param:"type"`
	// Params is the step's params as YAML decoded them (int, float64, bool,
	// string, []any, map[string]any values); never nil after Load. The step
	// decodes it with internal/params.
	Params map[string]any `param:"params"`
}

// renderStep is the config name of the step that produces token IDs.
const renderStep = "render"

const (
	mib                       = 1 << 20
	defaultMaxRequestBodySize = 64
	defaultMaxAnswerSize      = 256
	defaultMemoryBudgetWait   = 250 * time.Millisecond
	maxMaxRequestBodySize     = (math.MaxInt64 - 1) / mib
)

// Default returns the config with every default set and no gateway address
// and no steps.
func Default() Config {
	return Config{
		LogLevel: 2,
		Server: Server{
			ListenAddr:         ":8080",
			GRPCListenAddr:     ":9090",
			ReadTimeout:        30 * time.Second,
			WriteTimeout:       120 * time.Second,
			ShutdownTimeout:    25 * time.Second,
			MaxRequestBodySize: defaultMaxRequestBodySize,

			ReadHeaderTimeout:     10 * time.Second,
			MaxHeaderBytes:        256 << 10,
			StreamWriteTimeout:    30 * time.Second,
			MaxConcurrentRequests: 4096,
			MaxConcurrentStreams:  2048,
			RetryAfter:            time.Second,
			MemoryBudgetWait:      defaultMemoryBudgetWait,
		},
		Gateway: Gateway{
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
			Timeout:             60 * time.Second,
			ConnectTimeout:      10 * time.Second,
			StreamIdleTimeout:   120 * time.Second,
			Retry:               gateway.DefaultRetry,
			UserAgent:           gateway.DefaultUserAgent,
			Transport:           gateway.TransportH1,
			MaxAnswerSize:       defaultMaxAnswerSize,
		},
		Pipeline:  Pipeline{UseOpenAIFormat: true, SessionHeader: headers.SessionID, VersionPolicy: VersionPolicyAny},
		Control:   defaultControl(),
		Responses: defaultResponses(),
	}
}

// MaxRequestBodyBytes is MaxRequestBodySize in bytes (the default when 0).
func (s Server) MaxRequestBodyBytes() int64 {
	if s.MaxRequestBodySize == 0 {
		return defaultMaxRequestBodySize * mib
	}
	return int64(s.MaxRequestBodySize) * mib
}

// DocumentLimits are the bounds on a request body's structure
// (server.max_messages, max_content_blocks, max_json_nodes; 0 takes the
// default).
func (s Server) DocumentLimits() requestbody.Limits {
	return requestbody.Limits{Messages: s.MaxMessages, ContentBlocks: s.MaxContentBlocks, JSONNodes: s.MaxJSONNodes}
}

// MemoryBudgetBytes is the memory budget in bytes: MemoryBudget, or the
// derived default (defaultLimit, membudget.DefaultLimit) when 0; 0 (no
// budget) when negative.
func (s Server) MemoryBudgetBytes(defaultLimit func() int64) int64 {
	switch {
	case s.MemoryBudget < 0:
		return 0
	case s.MemoryBudget == 0:
		return defaultLimit()
	}
	return int64(s.MemoryBudget) * mib
}

// MaxAnswerBytes is MaxAnswerSize in bytes (the default when 0).
func (g Gateway) MaxAnswerBytes() int64 {
	if g.MaxAnswerSize == 0 {
		return defaultMaxAnswerSize * mib
	}
	return int64(g.MaxAnswerSize) * mib
}

// Validate reports the first invalid value, naming its key.
func (c Config) Validate() error {
	if c.LogLevel < 1 || c.LogLevel > 5 {
		return fmt.Errorf("log_level: must be between 1 and 5, got %d", c.LogLevel)
	}
	if err := c.Server.validate(); err != nil {
		return err
	}
	if err := c.Gateway.validate(); err != nil {
		return err
	}
	if err := c.Tracing.validate(); err != nil {
		return err
	}
	if err := c.Control.validate(); err != nil {
		return err
	}
	if err := c.Pipeline.validatePinning(); err != nil {
		return err
	}
	if err := c.Responses.validate(); err != nil {
		return err
	}
	return c.Pipeline.Validate()
}

func (t Tracing) validate() error {
	switch {
	case t.Protocol != "" && t.Protocol != "grpc" && t.Protocol != "http" && t.Protocol != "http/protobuf":
		return fmt.Errorf(`tracing.protocol: must be "grpc" or "http/protobuf", got %q`, t.Protocol)
	case t.SampleRatio != nil && (*t.SampleRatio < 0 || *t.SampleRatio > 1):
		return fmt.Errorf("tracing.sample_ratio: must be between 0 and 1, got %v", *t.SampleRatio)
	case t.Timeout < 0:
		return fmt.Errorf("tracing.timeout: must not be negative, got %s", t.Timeout)
	}
	for _, key := range []struct{ name, url string }{{"tracing.endpoint", t.Endpoint}, {"tracing.traces_endpoint", t.TracesEndpoint}} {
		if key.url == "" || !strings.Contains(key.url, "://") {
			continue // host:port, for grpc
		}
		if u, err := url.Parse(key.url); err != nil || u.Host == "" {
			return fmt.Errorf("%s: must be a URL with a host or host:port, got %q", key.name, key.url)
		}
	}
	return nil
}

func (s Server) validate() error {
	switch n := s.MaxRequestBodySize; {
	case s.ListenAddr == "":
		return errors.New("server.listen_addr: required")
	case s.GRPCListenAddr == "":
		return errors.New("server.grpc_listen_addr: required")
	case n < 0:
		return fmt.Errorf("server.max_request_body_size must be positive, got %d", n)
	case n > maxMaxRequestBodySize:
		return fmt.Errorf("server.max_request_body_size must be at most %d, got %d", maxMaxRequestBodySize, n)
	case s.MaxMessages < 0:
		return fmt.Errorf("server.max_messages: must not be negative, got %d", s.MaxMessages)
	case s.MaxContentBlocks < 0:
		return fmt.Errorf("server.max_content_blocks: must not be negative, got %d", s.MaxContentBlocks)
	case s.MaxJSONNodes < 0:
		return fmt.Errorf("server.max_json_nodes: must not be negative, got %d", s.MaxJSONNodes)
	case s.MaxHeaderBytes < 1024:
		return fmt.Errorf("server.max_header_bytes: must be at least 1024, got %d", s.MaxHeaderBytes)
	case s.MaxConcurrentRequests < 0:
		return fmt.Errorf("server.max_concurrent_requests: must not be negative, got %d", s.MaxConcurrentRequests)
	case s.MaxConcurrentStreams < 0:
		return fmt.Errorf("server.max_concurrent_streams: must not be negative, got %d", s.MaxConcurrentStreams)
	case s.MemoryBudget > maxMaxRequestBodySize:
		return fmt.Errorf("server.memory_budget: must be at most %d, got %d", maxMaxRequestBodySize, s.MemoryBudget)
	case s.MemoryBudgetWait < 0:
		return fmt.Errorf("server.memory_budget_wait: must not be negative, got %s", s.MemoryBudgetWait)
	}
	for i, name := range s.TrustedRoutingHeaders {
		if !headers.Trustable(name) {
			return fmt.Errorf("server.trusted_routing_headers[%d]: %q is not a routing header a client may be trusted with "+
				"(x-gateway-*, x-llm-d-*, x-*-host-port, x-data-parallel-rank)", i, name)
		}
	}
	if err := s.TLS.Validate(); err != nil {
		return fmt.Errorf("server.tls.%w", err)
	}
	if err := s.GRPCTLS.Validate(); err != nil {
		return fmt.Errorf("server.grpc_tls.%w", err)
	}
	return positive(
		keyed{"server.read_timeout", s.ReadTimeout},
		keyed{"server.write_timeout", s.WriteTimeout},
		keyed{"server.shutdown_timeout", s.ShutdownTimeout},
		keyed{"server.read_header_timeout", s.ReadHeaderTimeout},
		keyed{"server.stream_write_timeout", s.StreamWriteTimeout},
		keyed{"server.retry_after", s.RetryAfter},
	)
}

func (g Gateway) validate() error {
	if g.Address == "" {
		return errors.New("gateway.address: required")
	}
	u, err := url.Parse(g.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("gateway.address: must be an http(s) URL with a host, got %q", g.Address)
	}
	if g.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("gateway.max_idle_conns_per_host: must not be negative, got %d", g.MaxIdleConnsPerHost)
	}
	if g.Transport != "" && g.Transport != gateway.TransportH1 && g.Transport != gateway.TransportNetHTTP {
		return fmt.Errorf("gateway.transport: must be %q or %q, got %q", gateway.TransportH1, gateway.TransportNetHTTP, g.Transport)
	}
	if g.TLS.Enabled() && u.Scheme != "https" {
		return fmt.Errorf("gateway.tls: set but gateway.address %q is not https", g.Address)
	}
	if err := g.TLS.Validate(); err != nil {
		return fmt.Errorf("gateway.tls.%w", err)
	}
	if !validUserAgent(g.UserAgent) {
		return fmt.Errorf("gateway.user_agent: must be printable ASCII, got %q", g.UserAgent)
	}
	if g.MaxAnswerSize < 0 || g.MaxAnswerSize > maxMaxRequestBodySize {
		return fmt.Errorf("gateway.max_answer_size: must be between 0 and %d, got %d", maxMaxRequestBodySize, g.MaxAnswerSize)
	}
	if g.StreamIdleTimeout < 0 {
		return fmt.Errorf("gateway.stream_idle_timeout: must not be negative, got %s", g.StreamIdleTimeout)
	}
	if err := g.Retry.Validate(); err != nil {
		return fmt.Errorf("gateway.retry.%w", err)
	}
	return positive(
		keyed{"gateway.idle_conn_timeout", g.IdleConnTimeout},
		keyed{"gateway.timeout", g.Timeout},
		keyed{"gateway.connect_timeout", g.ConnectTimeout},
	)
}

// validUserAgent reports whether ua can be a header value: printable
// ASCII ("" means the default).
func validUserAgent(ua string) bool {
	for i := 0; i < len(ua); i++ {
		if ua[i] < 0x20 || ua[i] > 0x7e {
			return false
		}
	}
	return true
}

// keyed is a duration and its key, for positive.
type keyed struct {
	key string
	d   time.Duration
}

// positive rejects the first duration that is not above zero.
func positive(durations ...keyed) error {
	for _, k := range durations {
		if k.d <= 0 {
			return fmt.Errorf("%s: must be positive, got %s", k.key, k.d)
		}
	}
	return nil
}

// validatePinning checks dp_size and session_header.
func (p Pipeline) validatePinning() error {
	switch {
	case p.DPSize < 0 || p.DPSize > 4096:
		return fmt.Errorf("pipeline.dp_size: must be between 0 and 4096, got %d", p.DPSize)
	case p.SessionHeader != "" && !headers.Forwardable(p.SessionHeader):
		return fmt.Errorf("pipeline.session_header: must name a header the legs receive, got %q", p.SessionHeader)
	case p.VersionPolicy != "" && p.VersionPolicy != VersionPolicyAny && p.VersionPolicy != VersionPolicyConsistent:
		return fmt.Errorf(`pipeline.version_policy: must be "any" or "consistent", got %q`, p.VersionPolicy)
	}
	return nil
}

// Validate checks the step list: every step has a type, and the tokens-in
// format (use_openai_format false) has a render step to produce its token IDs
// (compat §2.3 point 1).
func (p Pipeline) Validate() error {
	for i, s := range p.Steps {
		if strings.TrimSpace(s.Type) == "" {
			return fmt.Errorf("pipeline.steps[%d].type: required", i)
		}
	}
	hasRender := slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Type == renderStep })
	if !p.UseOpenAIFormat && !hasRender {
		return errors.New(`pipeline.use_openai_format=false requires a "render" step (the tokens-in format sends token IDs that render produces)`)
	}
	return nil
}
