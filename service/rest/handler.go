package rest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// Handler serves the REST API.
type Handler struct {
	mux     *http.ServeMux
	gateway *runtime.ServeMux
	client  coordinatorv1.CoordinatorServiceClient
	maxBody int64
	// trustTransfer relays a client's transfer params on passthrough paths
	// (server.trust_client_transfer_params).
	trustTransfer bool
	// limits bound a body's structure as it is parsed (zero: the defaults).
	limits requestbody.Limits
	// trusted are the routing headers a client may set
	// (server.trusted_routing_headers).
	trusted headers.Trusted
	ready   *admission.Readiness
	metrics *metrics.Metrics
	queued  steps.RequestStore // nil without a step keeping queued requests (requests.go)
	holder  steps.Holder       // nil: no request is held open (requests.go)
	// streamWriteTimeout bounds each write of a stream (transcode.go); 0: none.
	streamWriteTimeout time.Duration
	pass               *passthrough // nil without a gateway to relay to (passthrough.go)
	// endpoints are the inference routes' bindings, by mux pattern.
	endpoints map[string]binding
	// budget is the process's memory budget (server.memory_budget), which
	// each inference request draws its body from; nil: none.
	budget *membudget.Budget
}

// Options are what the REST front serves with besides its
// CoordinatorService client. Ready and Metrics are required.
type Options struct {
	// MaxBody caps request bodies (413 past it).
	MaxBody int64
	Ready   *admission.Readiness
	Metrics *metrics.Metrics
	// Budget is the process's memory budget (server.memory_budget); nil:
	// none.
	Budget *membudget.Budget
	// Limits bound a body's structure as it is parsed (zero: the
	// defaults).
	Limits requestbody.Limits
	// Trusted are the routing headers a client may set
	// (server.trusted_routing_headers).
	Trusted headers.Trusted
	// TrustTransfer relays a client's transfer params on passthrough paths
	// (server.trust_client_transfer_params).
	TrustTransfer bool
	// StreamWriteTimeout bounds each write of a stream; 0: none.
	StreamWriteTimeout time.Duration
	// Queued serves /v1/requests/{id} (requests.go); nil: no step keeps
	// queued requests. Holder holds a request open; nil: none is.
	Queued steps.RequestStore
	Holder steps.Holder
	// Passthrough relays every path no route serves to the gateway
	// (passthrough.go); nil: those paths get 404.
	Passthrough *Passthrough
	// StoredResponses serves the stored Responses' routes
	// (stored_responses.go): responses.store.backend is not off.
	StoredResponses bool
}

// Passthrough is what the passthrough relays with: the gateway client, the
// admission control its requests pass, and the log of what it relays.
//
// The passthrough relays every path no route serves (/v1/models,
// /v1/embeddings, /tokenize, ...) to the gateway with EPP-Profile: decode:
// same method, path, query and forwardable headers (the client's routing
// headers dropped, compat D24), x-request-id validated or regenerated. It
// fails closed (passroute.go): a path with an encoded "/", or not
// canonical once decoded, is 400; a path that reaches a worker's inference
// handler outside the pipeline (an inference route with trailing slashes,
// below one, /invocations) is 404; a coded body is 415; a body that is not
// one JSON object (whatever its Content-Type) is 400, but a form to vLLM's
// audio routes, which streams to the gateway as it comes. Each request is
// admitted by admission as a request (not a stream: what the answer is
// comes later), so it counts against server.max_concurrent_requests and is
// drained at shutdown. A JSON body is read whole under the max body size
// (413 past it), checked, and loses the client's transfer params (compat
// D23) unless server.trust_client_transfer_params is on; the headers
// describing the client's body (Digest, ...) go only with a body relayed
// as sent. The answer is relayed as it comes, whatever its status, each
// read flushed to the client, the server's write timeout replaced by
// server.stream_write_timeout per write. No answer from the gateway is
// 502, or 504 when it timed out.
type Passthrough struct {
	Gateway   *gateway.Client
	Admission *admission.Controller
	Log       *slog.Logger
}

// NewHandler builds the REST front over a CoordinatorService client.
func NewHandler(ctx context.Context, client coordinatorv1.CoordinatorServiceClient, o Options) (*Handler, error) {
	gw := newGatewayMux()
	if err := coordinatorv1.RegisterCoordinatorServiceHandlerClient(ctx, gw, client); err != nil {
		return nil, err
	}
	h := &Handler{mux: http.NewServeMux(), gateway: gw, client: client, maxBody: o.MaxBody, ready: o.Ready, metrics: o.Metrics,
		endpoints: make(map[string]binding, 7), budget: o.Budget, limits: o.Limits, trusted: o.Trusted,
		trustTransfer: o.TrustTransfer, streamWriteTimeout: o.StreamWriteTimeout, holder: o.Holder}
	if o.Passthrough != nil {
		h.pass = &passthrough{gateway: o.Passthrough.Gateway, admission: o.Passthrough.Admission, log: o.Passthrough.Log}
	}
	h.serveQueued(o.Queued)
	h.serveStoredResponses(o.StoredResponses)
	h.handleInference("POST /v1/chat/completions", coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS)
	h.handleInference("POST /v1/completions", coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS)
	h.handleInference("POST /inference/v1/generate", coordinatorv1.Endpoint_ENDPOINT_GENERATE)
	h.handleInference("POST /v1/responses", coordinatorv1.Endpoint_ENDPOINT_RESPONSES)
	h.handleInference("POST /v1/messages", coordinatorv1.Endpoint_ENDPOINT_MESSAGES)
	h.handleCount("POST /v1/messages/count_tokens", coordinatorv1.Endpoint_ENDPOINT_MESSAGES)
	h.handleCount("POST /v1/responses/input_tokens", coordinatorv1.Endpoint_ENDPOINT_RESPONSES)
	h.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") }))
	h.handle("GET /readyz", http.HandlerFunc(h.readyz))
	h.handle("GET /metrics", o.Metrics.Handler())
	h.handle("GET /openapi.json", http.HandlerFunc(serveOpenAPI))
	h.mux.HandleFunc("/v1/requests/{id}", h.unqueued) // serveQueued's methods win over it
	h.mux.HandleFunc("/", h.unregistered)
	return h, nil
}

// handle serves pattern ("METHOD /path", GET taking HEAD too); the path's
// other methods get 405 instead of the passthrough, which takes every path
// nothing else serves, in the error dialect of the route's API.
func (h *Handler) handle(pattern string, handler http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	h.mux.Handle(pattern, handler)
	h.mux.Handle(path, methodNotAllowed(h.endpoints[pattern].dialect, allow))
}

// handleInference serves an OpenAI route (inference).
func (h *Handler) handleInference(pattern string, endpoint coordinatorv1.Endpoint) {
	b := bindingOf(endpoint)
	h.endpoints[pattern] = b
	h.handle(pattern, h.inference(b))
}

// ServeHTTP implements http.Handler. A body declared past the cap is
// refused before any route runs (refuseDeclaredBody).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.refuseDeclaredBody(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if !h.ready.Ready() {
		writeText(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// inference handles one OpenAI route: it reads the body once under the
// size cap, parses it once into the request's document (a 400 when it is
// not a JSON object), settles the request id, and hands the bytes, with the
// document in the call's context, to Generate or GenerateStream through
// grpc-gateway according to the body's "stream", read as the service and
// the worker read it (requestbody.Document.Stream, decided once; a value vLLM would refuse is a
// 400 naming it). It counts the request in the metrics with the status
// the client got.
func (h *Handler) inference(b binding) http.Handler {
	name := b.label
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			h.metrics.RequestDone(metrics.APIREST, name, strconv.Itoa(rec.status()), time.Since(start))
			h.metrics.Bytes(metrics.APIREST, "out", rec.written)
		}()
		h.serveInference(rec, r, b)
	})
}

// serveInference is inference's work on one request.
func (h *Handler) serveInference(w http.ResponseWriter, r *http.Request, b binding) {
	sent := r.Header.Get("X-Request-Id")
	id := headers.RequestIDOrNew(sent)
	w.Header().Set("X-Request-Id", id)
	headers.DropHopByHop(r.Header) // the matcher sees one name at a time
	if refuseCoded(w, r, b.dialect, id) {
		return
	}
	if h.budget != nil { // the request's account, which travels with it to the pipeline (in process)
		a := h.budget.Open()
		defer a.Close()
		r = r.WithContext(membudget.WithAccount(r.Context(), a))
	}
	data, err := h.readBody(w, r)
	if err != nil {
		h.refuseBody(w, b, id, err)
		return
	}
	// The one parse of the body: the service takes the document from the
	// call's context (frontdoor.With, frontdoor.ParsedBody).
	doc, err := requestbody.ParseLimited(data, b.format, h.limits)
	if err != nil {
		writeAPIError(w, b.dialect, http.StatusBadRequest, "invalid JSON body: "+err.Error()+" (request_id: "+id+")", "")
		return
	}
	stream := false
	if !b.count { // a count answers the same whatever "stream" says
		if stream, err = doc.Stream(); err != nil { // decided as the service decides it, from the same document
			writeAPIError(w, b.dialect, http.StatusBadRequest, err.Error()+" (request_id: "+id+")", "")
			return
		}
	}
	h.metrics.Bytes(metrics.APIREST, "in", len(data))
	defer h.metrics.Begin(metrics.APIREST, stream)()
	if !stream && !b.count {
		h.holdOpen(w, r)
	}
	h.transcode(w, r, b, call{id: id, dialect: b.dialect, minted: id != sent}, doc, stream)
}

// readBody reads the whole body, failing with *http.MaxBytesError past the
// cap. It grows with the bytes that arrive, whatever Content-Length
// declares, drawing them from the request's account, and then draws what
// the body's parse and the legs will hold (membudget.BodyCharge): the
// error wraps membudget.ErrExhausted when the budget has no room.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := membudget.ReadAll(r.Context(), capBody(w, r.Body, h.maxBody), r.ContentLength, h.maxBody)
	if errors.Is(err, membudget.ErrTooLarge) { // the cap reader says so first; for completeness
		return nil, &http.MaxBytesError{Limit: h.maxBody}
	}
	if err != nil {
		return nil, err
	}
	n := int64(len(data))
	if err := membudget.FromContext(r.Context()).Take(r.Context(), membudget.BodyCharge(n)-n); err != nil {
		return nil, err
	}
	return data, nil
}

// refuseBody answers a request whose body could not be read (bodyFailure),
// or had no room in the memory budget: 429 with Retry-After, or 413 when
// it can never fit (apierror.BudgetStatus).
func (h *Handler) refuseBody(w http.ResponseWriter, b binding, id string, err error) {
	if errors.Is(err, membudget.ErrExhausted) {
		writeError(w, b.dialect, apierror.BudgetStatus(err, id).Err())
		return
	}
	code, msg := bodyFailure(err)
	writeAPIError(w, b.dialect, code, msg+" (request_id: "+id+")", "")
}

// capBody is http.MaxBytesReader on the connection's own writer, not on a
// wrapper such as recorder: only then does the server, past the cap, close
// the connection after the answer instead of reading the rest of the body.
func capBody(w http.ResponseWriter, body io.ReadCloser, n int64) io.ReadCloser {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return http.MaxBytesReader(w, body, n)
		}
		w = u.Unwrap()
	}
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text)
}

// recorder notes the status and the body bytes written through it.
type recorder struct {
	http.ResponseWriter
	code    int
	written int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.written += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, write
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// status is the status the client got; 499 if nothing was written (the
// client went away first).
func (r *recorder) status() int {
	if r.code == 0 {
		return 499
	}
	return r.code
}
