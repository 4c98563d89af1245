// Package rest is the coordinator's OpenAI-compatible REST front: the only
// place that knows HTTP and OpenAI framing. Requests reach CoordinatorService
// through a real gRPC client connection, so the gRPC interceptors
// (logging, recovery, protovalidate) run for REST as for gRPC clients:
// non-streaming requests through the grpc-gateway mux, streaming ones
// through a server-sent-events forwarder over GenerateStream.
package rest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestid"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/upstream"
)

// Handler serves the REST API.
type Handler struct {
	mux     *http.ServeMux
	gateway *runtime.ServeMux
	client  coordinatorv1.CoordinatorServiceClient
	streams streamServer // the streaming route's way to GenerateStream (stream.go)
	maxBody int64
	ready   *service.Readiness
	metrics *metrics.Metrics
	queued  steps.RequestStore // nil without an async-broker step (requests.go)
	// streamWriteTimeout bounds each write of a stream (stream.go); 0: none.
	streamWriteTimeout time.Duration
	pass               *passthrough // nil without a gateway to relay to (passthrough.go)
}

// NewHandler builds the REST front over a CoordinatorService client.
// maxBody caps request bodies (413 past it).
func NewHandler(ctx context.Context, client coordinatorv1.CoordinatorServiceClient, maxBody int64, ready *service.Readiness, m *metrics.Metrics) (*Handler, error) {
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, rawJSON{}),
		runtime.WithMarshalerOption("application/json", rawJSON{}),
		runtime.WithErrorHandler(gatewayError),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(forwardStatus),
	)
	if err := coordinatorv1.RegisterCoordinatorServiceHandlerClient(ctx, gw, client); err != nil {
		return nil, err
	}
	h := &Handler{mux: http.NewServeMux(), gateway: gw, client: client, maxBody: maxBody, ready: ready, metrics: m}
	h.handle("POST /v1/chat/completions", h.inference(coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS))
	h.handle("POST /v1/completions", h.inference(coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS))
	h.handle("POST /inference/v1/generate", h.inference(coordinatorv1.Endpoint_ENDPOINT_GENERATE))
	h.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") }))
	h.handle("GET /readyz", http.HandlerFunc(h.readyz))
	h.handle("GET /metrics", m.Handler())
	h.handle("GET /openapi.json", http.HandlerFunc(serveOpenAPI))
	h.mux.HandleFunc("/v1/requests/{id}", h.unqueued) // ServeQueued's methods win over it
	h.mux.HandleFunc("/", h.unregistered)
	return h, nil
}

// handle serves pattern ("METHOD /path", GET taking HEAD too); the path's
// other methods get 405 instead of the passthrough, which takes every path
// nothing else serves.
func (h *Handler) handle(pattern string, handler http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	h.mux.Handle(pattern, handler)
	h.mux.Handle(path, methodNotAllowed(allow))
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

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
// document in the call's context, to Generate (through grpc-gateway) or
// GenerateStream (as SSE) according to the body's "stream". It counts the
// request in the metrics with the status the client got.
func (h *Handler) inference(endpoint coordinatorv1.Endpoint) http.Handler {
	name := service.FormatOf(endpoint).String()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			h.metrics.RequestDone(metrics.APIREST, name, strconv.Itoa(rec.status()), time.Since(start))
			h.metrics.Bytes(metrics.APIREST, "out", rec.written)
		}()
		h.serveInference(rec, r, endpoint)
	})
}

// serveInference is inference's work on one request.
func (h *Handler) serveInference(w http.ResponseWriter, r *http.Request, endpoint coordinatorv1.Endpoint) {
	id := requestid.OrNew(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", id)
	upstream.DropHopByHop(r.Header) // incomingHeader sees one name at a time
	data, err := h.readBody(w, r)
	if err != nil {
		code, msg := bodyFailure(err)
		writeOpenAIError(w, code, msg+" (request_id: "+id+")", "")
		return
	}
	// The one parse of the body: the service takes the document from the
	// call's context (service.WithParsedBody).
	doc, err := steps.ParseDocument(data, service.FormatOf(endpoint))
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error()+" (request_id: "+id+")", "")
		return
	}
	stream := false
	if raw, ok := doc.Root().Get("stream"); ok {
		stream, _ = jsonbody.Bool(raw)
	}
	r = r.WithContext(service.WithParsedBody(r.Context(), doc))
	h.metrics.Bytes(metrics.APIREST, "in", len(data))
	defer h.metrics.Begin(metrics.APIREST, stream)()
	if stream {
		h.serveStream(w, r, &coordinatorv1.GenerateStreamRequest{
			RequestId: id,
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
				Endpoint: endpoint, Json: data,
			}},
		})
		return
	}
	h.holdOpen(w, r)
	// grpc-gateway would make X-Forwarded-Host the client's Host and add its
	// address to X-Forwarded-For: the legs carry the client's own values,
	// as on the streaming route and over gRPC (compat §3.4).
	r = r.WithContext(r.Context())
	r.Host, r.RemoteAddr = "", ""
	r.Body = &requestBody{endpoint: endpoint, requestID: id, data: data}
	h.gateway.ServeHTTP(w, r)
}

// outgoingHeader lets the step timings out as Server-Timing; no other call
// metadata reaches REST clients.
func outgoingHeader(key string) (string, bool) {
	if key == "server-timing" {
		return "Server-Timing", true
	}
	return "", false
}

// readBody reads the whole body, failing with *http.MaxBytesError past the cap.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := capBody(w, r.Body, h.maxBody)
	if r.ContentLength > 0 && r.ContentLength <= h.maxBody {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, err
		}
		return buf, nil // the server stops the body at Content-Length
	}
	return io.ReadAll(body)
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

// incomingHeader passes the client headers a leg may receive into the call
// metadata (lowercase keys); the rest stay at the edge.
func incomingHeader(key string) (string, bool) {
	k := strings.ToLower(key)
	if !upstream.Forwardable(k) || k == "user-agent" || k == "authorization" {
		// grpc-gateway forwards authorization itself; user-agent is gRPC's.
		return "", false
	}
	return k, true
}

// outgoingMetadata is incomingHeader for the streaming route, which calls
// the gRPC client directly.
func outgoingMetadata(ctx context.Context, h http.Header) context.Context {
	md := make(metadata.MD, len(h))
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		if k == "Authorization" {
			md["authorization"] = v[:1:1]
			continue
		}
		if mk, ok := incomingHeader(k); ok && validMetadataValue(v[0]) {
			md[mk] = v[:1:1]
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// validMetadataValue reports whether v can travel as gRPC ASCII metadata.
func validMetadataValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// forwardStatus gives a Generate answer the worker's status and content
// type (and GetRequest and DeleteRequest theirs: forwardQueued).
func forwardStatus(_ context.Context, w http.ResponseWriter, m proto.Message) error {
	resp, ok := m.(*coordinatorv1.GenerateResponse)
	if !ok || resp.GetOpenai() == nil {
		forwardQueued(w, m)
		return nil
	}
	if ct := resp.GetOpenai().GetContentType(); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if code := int(resp.GetOpenai().GetStatusCode()); code != 0 && code != http.StatusOK {
		w.WriteHeader(code)
	}
	return nil
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
