// Package metrics holds the coordinator's Prometheus metrics: requests,
// latency, time to first token and between tokens by API and endpoint,
// prompt and generated tokens by API and model, steps by outcome,
// legs by phase and upstream status, in-flight requests and streams,
// conditional-decode hits, prefill fallbacks, refused requests, bytes in
// and out, billed prompt tokens by kind, client transfer params dropped,
// TLS file reloads, and the gRPC
// server's own.
// They live on a registry of their own, served at /metrics on the REST port.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/steps"
)

// APIs: how a request arrived.
const (
	APIREST = "rest"
	APIGRPC = "grpc"
)

// requestBuckets suit LLM requests: milliseconds (a cache hit, an error)
// to minutes (a long generation).
var requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// tokenBuckets suit the time between two streamed tokens: a millisecond to
// a few seconds (a stalled worker).
var tokenBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5}

// stepBuckets suit one step or leg: sub-millisecond to a minute.
var stepBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics are the coordinator's collectors. Safe for concurrent use.
type Metrics struct {
	registry    *prometheus.Registry
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	itl         *prometheus.HistogramVec
	prompt      *prometheus.CounterVec
	generated   *prometheus.CounterVec
	models      *modelLabels
	steps       *prometheus.HistogramVec
	legs        *prometheus.HistogramVec
	retries     *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	conditional *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	cut         *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	tlsReloads  *prometheus.CounterVec
	billed      *prometheus.CounterVec // prompt tokens by kind (billed.go)
	// transferDropped counts requests whose client transfer params were
	// removed (transfer_params.go).
	transferDropped *prometheus.CounterVec
	// routingDropped counts requests whose client routing headers were
	// removed (compat D24).
	routingDropped *prometheus.CounterVec
	// held counts the requests held during a pause by outcome (control.go).
	held *prometheus.CounterVec
	// mismatches counts the weight-version mismatches (control.go).
	mismatches *prometheus.CounterVec
	// continuations counts the requests a pause aborted (continuations.go).
	continuations *prometheus.CounterVec
	// GRPC are the gRPC server's per-method metrics; its interceptors go
	// on the server.
	GRPC *grpcprom.ServerMetrics
}

// New registers every collector, with the Go runtime and process ones, on
// a new registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		models:   &modelLabels{seen: map[string]bool{}},
		GRPC:     grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(requestBuckets))),
	}
	m.requestCollectors()
	m.pipelineCollectors()
	m.serverCollectors()
	m.registry.MustRegister(m.requests, m.duration, m.ttft, m.itl, m.prompt, m.generated, m.steps, m.legs, m.retries, m.inFlight, m.conditional, m.fallbacks, m.rejected, m.cut, m.bytes, m.tlsReloads, m.GRPC,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.billed = newBilled(m.registry)
	m.transferDropped = newTransferDropped(m.registry)
	m.routingDropped = newRoutingDropped(m.registry)
	m.held = newHeld(m.registry)
	m.mismatches = newVersionMismatches(m.registry)
	m.continuations = newContinuations(m.registry)
	m.initialize()
	return m
}

// requestCollectors builds the request collectors: requests, latencies, tokens.
func (m *Metrics) requestCollectors() {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_requests_total",
		Help: "Inference requests by API (rest, grpc), endpoint and final status (HTTP status for REST, gRPC code for gRPC).",
	}, []string{"api", "endpoint", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coordinator_request_duration_seconds", Buckets: requestBuckets,
		Help: "Time from a request's arrival to the end of its answer.",
	}, []string{"api", "endpoint"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coordinator_time_to_first_token_seconds", Buckets: requestBuckets,
		Help: "Time from a request's arrival to the first byte of its answer (the first event of a stream).",
	}, []string{"api", "endpoint"})
	m.itl = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coordinator_inter_token_latency_seconds", Buckets: tokenBuckets,
		Help: "Time between two events of a streamed answer (one per event; the gap before a batch of events that arrived together is shared among them).",
	}, []string{"api", "endpoint"})
	m.prompt = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_prompt_tokens_total",
		Help: "Prompt tokens of answered requests (the usage of the final answer), by API and model (the first " + strconv.Itoa(maxModels) + " models seen; later ones count as \"other\").",
	}, []string{"api", "model"})
	m.generated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_generation_tokens_total",
		Help: "Generated (completion) tokens of answered requests (the usage of the final answer), by API and model (as coordinator_prompt_tokens_total).",
	}, []string{"api", "model"})
}

// pipelineCollectors builds the pipeline's collectors: steps, legs, retries, conditional decode, prefill fallbacks.
func (m *Metrics) pipelineCollectors() {
	m.steps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coordinator_step_duration_seconds", Buckets: stepBuckets,
		Help: "Time spent in each pipeline step, by outcome (ok, done-early, error; skipped steps count with 0).",
	}, []string{"step", "outcome"})
	m.legs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coordinator_leg_duration_seconds", Buckets: stepBuckets,
		Help: "Time until a worker or render leg's response headers, by phase and upstream HTTP status (0: no answer).",
	}, []string{"phase", "status"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_leg_retries_total",
		Help: "Leg attempts past the first (gateway.retry: encode and prefill legs are sent again after a transport failure or a retryable status), by phase.",
	}, []string{"phase"})
	m.conditional = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_conditional_decode_total",
		Help: "Conditional-decode outcomes: hit (a decode pod answered from its cache) or miss (412, the pipeline went on).",
	}, []string{"result"})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_prefill_fallbacks_total",
		Help: "Requests served by decode alone after their prefill leg failed (prefill fallback_to_decode), by reason (status_5xx, transport, timeout, missing_kv_params: an answer without the kv_transfer_params its KV connector needs).",
	}, []string{"reason"})
}

// serverCollectors builds the server's collectors: in flight, refused, cut at shutdown, bytes, TLS reloads.
func (m *Metrics) serverCollectors() {
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "coordinator_in_flight",
		Help: "Requests being served, by API and kind (request, stream).",
	}, []string{"api", "kind"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_rejected_requests_total",
		Help: "Inference requests refused before they started, by reason: requests (server.max_concurrent_requests reached, 429), streams (server.max_concurrent_streams reached, 429), shutting_down (503 while draining).",
	}, []string{"reason"})
	m.cut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_shutdown_cut_total",
		Help: "Calls still in flight when the shutdown drain's server.shutdown_timeout ran out, ended UNAVAILABLE \"server shutting down\" (REST 503 or a final SSE error event), by API and kind (request, stream).",
	}, []string{"api", "kind"})
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_body_bytes_total",
		Help: "Request and answer body bytes by API and direction (in, out).",
	}, []string{"api", "direction"})
	m.tlsReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_tls_reloads_total",
		Help: "Reloads of changed TLS files by file set (server.tls, server.grpc_tls, gateway.tls, render.tls, control.tls) and result (ok, error: the previous files stay in use).",
	}, []string{"file_set", "result"})
}

// Label values known before any request, whose series start at 0 so that
// rates and alerts see them from the first scrape.
var (
	apis            = []string{APIREST, APIGRPC}
	endpoints       = []string{"chat", "completions", "generate", "responses", "messages"}
	fallbackReasons = []string{"status_5xx", "transport", "timeout", "missing_kv_params"}
	fileSets        = []string{"server.tls", "server.grpc_tls", "gateway.tls", "render.tls", "control.tls"}
	stepOutcomes    = []steps.Outcome{steps.OutcomeOK, steps.OutcomeDoneEarly, steps.OutcomeError, steps.OutcomeSkipped}
)

// endpointPassthrough is the endpoint label of every relayed REST request
// (service/rest labels them so, whatever their path).
const endpointPassthrough = "passthrough"

// endpointsOf are the endpoint labels of api's requests: REST's relayed
// ones are the passthrough's.
func endpointsOf(api string) []string {
	if api == APIREST {
		return append(endpoints[:len(endpoints):len(endpoints)], endpointPassthrough)
	}
	return endpoints
}

// initialize creates the series of the known label values at 0: requests
// by success status, latencies, in-flight, shutdown cuts, outcomes,
// fallbacks, refusals, bytes and TLS reloads.
func (m *Metrics) initialize() {
	for _, api := range apis {
		ok := "OK"
		if api == APIREST {
			ok = "200"
		}
		for _, ep := range endpointsOf(api) {
			m.requests.WithLabelValues(api, ep, ok)
			m.duration.WithLabelValues(api, ep)
			m.ttft.WithLabelValues(api, ep)
			m.itl.WithLabelValues(api, ep)
		}
		for _, kind := range []string{"request", "stream"} {
			m.inFlight.WithLabelValues(api, kind)
			m.cut.WithLabelValues(api, kind)
		}
		for _, dir := range []string{"in", "out"} {
			m.bytes.WithLabelValues(api, dir)
		}
	}
	for _, r := range []string{"hit", "miss"} {
		m.conditional.WithLabelValues(r)
	}
	for _, phase := range []string{gateway.ProfileEncode, gateway.ProfilePrefill, gateway.ProfileDecode, "render"} {
		m.retries.WithLabelValues(phase)
	}
	for _, r := range fallbackReasons {
		m.fallbacks.WithLabelValues(r)
	}
	for _, r := range []string{RejectedRequests, RejectedStreams, RejectedShuttingDown} {
		m.rejected.WithLabelValues(r)
	}
	for _, fs := range fileSets {
		for _, r := range []string{"ok", "error"} {
			m.tlsReloads.WithLabelValues(fs, r)
		}
	}
}

// KnownSteps creates the step duration series of the configured steps, one
// per outcome, at 0.
func (m *Metrics) KnownSteps(names []string) {
	for _, name := range names {
		for _, o := range stepOutcomes {
			m.steps.WithLabelValues(name, string(o))
		}
	}
}

// maxModels bounds the model label: the model is the client's to choose,
// and only the first maxModels distinct models get a series of their own.
// Tokens are counted only from a worker's answer, so only models the
// workers serve take a place.
const maxModels = 32

// modelOther labels the tokens of models past maxModels.
const modelOther = "other"

// modelLabels hands out the model label values.
type modelLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *modelLabels) label(model string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[model] {
		return model
	}
	if len(l.seen) >= maxModels {
		return modelOther
	}
	l.seen[model] = true
	return model
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Gatherer is the registry, for tests.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Begin counts a request in flight and returns the function that ends it.
func (m *Metrics) Begin(api string, stream bool) (end func()) {
	kind := "request"
	if stream {
		kind = "stream"
	}
	g := m.inFlight.WithLabelValues(api, kind)
	g.Inc()
	return g.Dec
}

// RequestDone records a finished request.
func (m *Metrics) RequestDone(api, endpoint, status string, d time.Duration) {
	m.requests.WithLabelValues(api, endpoint, status).Inc()
	m.duration.WithLabelValues(api, endpoint).Observe(d.Seconds())
}

// FirstByte records a request's time to first token.
func (m *Metrics) FirstByte(api, endpoint string, d time.Duration) {
	m.ttft.WithLabelValues(api, endpoint).Observe(d.Seconds())
}

// Tokens counts a request's prompt and generated tokens, as its answer's
// usage reports them.
func (m *Metrics) Tokens(api, model string, prompt, generated int64) {
	label := m.models.label(model)
	if prompt > 0 {
		m.prompt.WithLabelValues(api, label).Add(float64(prompt))
	}
	if generated > 0 {
		m.generated.WithLabelValues(api, label).Add(float64(generated))
	}
}

// InterToken is the histogram of the time between two events of a
// streamed answer, in seconds, for a request's API and endpoint.
func (m *Metrics) InterToken(api, endpoint string) prometheus.Observer {
	return m.itl.WithLabelValues(api, endpoint)
}

// ConditionalDecodeStep is the type of the built-in step whose outcomes
// coordinator_conditional_decode_total counts (builtin.ConditionalDecodeType;
// metrics_test holds the two equal).
const ConditionalDecodeStep = "conditional-decode"

// Steps records how each step of a request went, and conditional-decode's
// hit or miss.
func (m *Metrics) Steps(timings []steps.Timing) {
	for _, t := range timings {
		m.steps.WithLabelValues(t.Step, string(t.Outcome)).Observe(t.Duration.Seconds())
		if t.Step == ConditionalDecodeStep {
			switch t.Outcome {
			case steps.OutcomeDoneEarly:
				m.conditional.WithLabelValues("hit").Inc()
			case steps.OutcomeOK:
				m.conditional.WithLabelValues("miss").Inc()
			}
		}
	}
}

// PrefillFallback counts a request that decode served alone after its
// prefill leg failed, by reason (steps.PD.Fallback.Reason).
func (m *Metrics) PrefillFallback(reason string) {
	m.fallbacks.WithLabelValues(reason).Inc()
}

// Reasons a request is refused (Rejected).
const (
	RejectedRequests     = "requests"
	RejectedStreams      = "streams"
	RejectedShuttingDown = "shutting_down"
)

// Rejected returns the counter of requests refused for reason
// (RejectedRequests, RejectedStreams, RejectedShuttingDown), for the caller
// to keep and increment.
func (m *Metrics) Rejected(reason string) prometheus.Counter {
	return m.rejected.WithLabelValues(reason)
}

// ShutdownCut counts a call of api (a stream when stream is true) that the
// shutdown drain ended at server.shutdown_timeout.
func (m *Metrics) ShutdownCut(api string, stream bool) {
	kind := "request"
	if stream {
		kind = "stream"
	}
	m.cut.WithLabelValues(api, kind).Inc()
}

// Bytes adds body bytes for an API, direction "in" or "out".
func (m *Metrics) Bytes(api, direction string, n int) {
	if n > 0 {
		m.bytes.WithLabelValues(api, direction).Add(float64(n))
	}
}

// LegDone implements gateway.Observer.
func (m *Metrics) LegDone(r gateway.LegResult) {
	m.legs.WithLabelValues(r.Phase, strconv.Itoa(r.StatusCode)).Observe(r.Duration.Seconds())
	if r.Attempt > 1 {
		m.retries.WithLabelValues(r.Phase).Inc()
	}
}

// TLSReload implements tlsfiles.Observer.
func (m *Metrics) TLSReload(fileSet, result string) {
	m.tlsReloads.WithLabelValues(fileSet, result).Inc()
}

var (
	_ gateway.Observer  = (*Metrics)(nil)
	_ tlsfiles.Observer = (*Metrics)(nil)
)
