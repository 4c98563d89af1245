package rest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// endpointPassthrough labels every relayed request in the metrics, whatever
// its path: clients choose paths, and must not choose metric series.
const endpointPassthrough = "passthrough"

// passthrough relays the requests of paths no route serves to the gateway
// (compat §3.6).
type passthrough struct {
	gateway   *gateway.Client
	admission *admission.Controller // nil admits every request
	log       *slog.Logger
}

// unregistered serves a path no route claims: the passthrough, counted in
// the metrics and logged once; 404 without one.
func (h *Handler) unregistered(w http.ResponseWriter, r *http.Request) {
	if h.pass == nil {
		notFound(w, r)
		return
	}
	start := time.Now()
	id := headers.RequestIDOrNew(r.Header.Get("X-Request-Id"))
	rec := &recorder{ResponseWriter: w}
	out := h.servePassthrough(rec, r, id, start)
	h.metrics.RequestDone(metrics.APIREST, endpointPassthrough, strconv.Itoa(rec.status()), time.Since(start))
	h.metrics.Bytes(metrics.APIREST, "in", out.in)
	h.metrics.Bytes(metrics.APIREST, "out", rec.written)
	h.pass.logDone(r, id, rec.status(), time.Since(start), out.err)
	if out.broken {
		panic(http.ErrAbortHandler) // the client sees a cut answer, not a clean end
	}
}

// outcome is how a relayed request went.
type outcome struct {
	// in counts the body bytes read from the client.
	in int
	// err is the failure to log: nil when the client got the gateway's
	// answer whole, or an answer of ours (413, 400, 405).
	err error
	// broken marks an answer that broke off after its headers went out.
	broken bool
}

// servePassthrough relays one request, which arrived at start.
func (h *Handler) servePassthrough(w http.ResponseWriter, r *http.Request, id string, start time.Time) outcome {
	w.Header().Set("X-Request-Id", id)
	if r.Method == http.MethodConnect {
		writeAPIError(w, apierror.DialectOpenAI, http.StatusMethodNotAllowed, "CONNECT is not relayed (request_id: "+id+")", "")
		return outcome{}
	}
	code, msg := refusePath(r)
	if code == 0 {
		code, msg = refuseBody(r)
	}
	if code != 0 {
		writeAPIError(w, apierror.DialectOpenAI, code, msg+" (request_id: "+id+")", "")
		return outcome{}
	}
	ctx, done, ok := h.admitPassthrough(r.Context(), w)
	if !ok {
		return outcome{}
	}
	defer done()
	endInFlight := h.metrics.Begin(metrics.APIREST, false)
	defer func() { endInFlight() }()
	fr := gateway.ForwardRequest{Method: r.Method, Target: target(r), RequestID: id, ContentLength: r.ContentLength}
	body, asSent, out, ok := h.passBody(w, r, id, &fr)
	if !ok {
		return out
	}
	fr.Header = h.passHeader(r, id, asSent)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // the gateway may think long; writes get their own bound
	resp, err := h.pass.gateway.Forward(gateway.WithObserver(ctx, h.metrics), fr)
	if err != nil {
		return outcome{in: body.count(), err: h.pass.failed(w, r, id, body.readErr(), err)}
	}
	defer resp.Body.Close()
	hdr := w.Header()
	for k, v := range resp.Header {
		hdr[k] = v
	}
	hdr.Set("X-Request-Id", id)
	w.WriteHeader(resp.StatusCode)
	if isEventStream(resp.Header.Get("Content-Type")) {
		endInFlight()
		endInFlight = h.metrics.Begin(metrics.APIREST, true)
		h.writeDeadline(rc)
		_ = rc.Flush() // the client learns the stream started before its first event
	}
	upErr, clientErr := h.relay(w, rc, resp.Body, func() {
		h.metrics.FirstByte(metrics.APIREST, endpointPassthrough, time.Since(start))
	})
	switch {
	case clientErr != nil:
		return outcome{in: body.count(), err: clientErr}
	case upErr != nil:
		return outcome{in: body.count(), err: upErr, broken: r.Context().Err() == nil}
	}
	return outcome{in: body.count()}
}

// passBody sets fr's body: the client's as it streams for a form to a form
// route, otherwise read whole and checked (passJSON). It returns the
// client's body as read, whether fr's is the client's as sent, and, when it
// wrote an answer instead (400, 413, 408), false and how the request went.
func (h *Handler) passBody(w http.ResponseWriter, r *http.Request, id string, fr *gateway.ForwardRequest) (*countedBody, bool, outcome, bool) {
	if r.ContentLength == 0 {
		return nil, true, outcome{}, true
	}
	body := &countedBody{r: capBody(w, r.Body, h.maxBody)}
	fr.Body = body
	if isForm(r) {
		return body, true, outcome{}, true
	}
	data, err := membudget.ReadAll(r.Context(), body, r.ContentLength, h.maxBody) // growing with the bytes, not 2× copies
	if err != nil {
		return body, false, outcome{in: body.count(), err: h.pass.failed(w, r, id, body.readErr(), err)}, false
	}
	data, asSent, err := h.passJSON(r, id, data)
	if err != nil {
		msg := "invalid JSON body: " + err.Error()
		if errors.Is(err, errPassedMedia) {
			msg = err.Error()
		}
		writeAPIError(w, apierror.DialectOpenAI, http.StatusBadRequest, msg+" (request_id: "+id+")", "")
		return body, false, outcome{in: body.count()}, false
	}
	fr.Body, fr.ContentLength = bytes.NewReader(data), int64(len(data))
	return body, asSent, outcome{}, true
}

// admitPassthrough admits a request (h.pass.admission; nil admits every
// one): its context, which the drain may end, and what to call when it
// ended. It writes the refusal (429 or 503, with Retry-After) and returns
// false when it is refused.
func (h *Handler) admitPassthrough(ctx context.Context, w http.ResponseWriter) (context.Context, func(), bool) {
	a := h.pass.admission
	if a == nil {
		return ctx, func() {}, true
	}
	actx, release, err := a.AdmitContext(ctx, false)
	if err != nil {
		writeError(w, apierror.DialectOpenAI, err) // 429 or 503, with Retry-After
		return ctx, nil, false
	}
	return actx, func() {
		// before release, while the drain's cause is still actx's
		if admission.CutByShutdown(actx) {
			h.metrics.ShutdownCut(metrics.APIREST, false)
		}
		release()
	}, true
}

// failed answers a request the gateway did not answer: 413 when the body
// went past the cap, 408 when it did not come within server.read_timeout,
// 400 when it could not be read, nothing when the client went away, 503
// when the shutdown's drain ended it, otherwise the gateway failure as
// apierror maps it (502, 504 on a timeout). It returns the failure to log.
func (p *passthrough) failed(w http.ResponseWriter, r *http.Request, id string, bodyErr, err error) error {
	if bodyErr != nil {
		// 413 and 408 before the context: the server cancels it on any
		// read error.
		code, msg := bodyFailure(bodyErr)
		if code != http.StatusBadRequest || r.Context().Err() == nil {
			writeAPIError(w, apierror.DialectOpenAI, code, msg+" (request_id: "+id+")", "")
			return nil
		}
	}
	switch {
	case r.Context().Err() != nil:
		return err
	case errors.Is(err, admission.ErrShuttingDown):
		writeError(w, apierror.DialectOpenAI, status.Error(codes.Unavailable, admission.ErrShuttingDown.Error()+" (request_id: "+id+")"))
		return err
	}
	writeError(w, apierror.DialectOpenAI, apierror.FromError(err, id).Err())
	return err
}

// relay copies the answer's body to the client, flushing each read as it
// comes (server-sent events arrive as sent), each write bounded by
// server.stream_write_timeout. onFirst runs before the first byte. It
// returns the first error of each side.
func (h *Handler) relay(w http.ResponseWriter, rc *http.ResponseController, body io.Reader, onFirst func()) (upErr, clientErr error) {
	bufp := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(bufp)
	buf := *bufp
	for first := true; ; first = false {
		n, err := body.Read(buf)
		if n > 0 {
			if first {
				onFirst()
			}
			h.writeDeadline(rc)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return nil, ferr
			}
		}
		if errors.Is(err, io.EOF) {
			h.writeDeadline(rc) // for the server's last write, the end of the body
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// logDone logs a relayed request once: at info when it went through (the
// gateway's own status included), debug when the client went away, warning
// otherwise.
func (p *passthrough) logDone(r *http.Request, id string, status int, d time.Duration, err error) {
	attrs := []slog.Attr{
		slog.String("request_id", id),
		slog.String("api", metrics.APIREST),
		slog.String("endpoint", endpointPassthrough),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", d),
	}
	switch {
	case err == nil:
		p.log.LogAttrs(r.Context(), slog.LevelInfo, "request done", attrs...)
	case r.Context().Err() != nil:
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "request cancelled by the client", append(attrs, slog.String("error", err.Error()))...)
	default:
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "request failed", append(attrs, slog.String("error", err.Error()))...)
	}
}

// relayBuffers recycles the relay's read buffers across requests.
var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// target is the request's escaped path and raw query, as the client sent
// them.
func target(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return r.URL.EscapedPath()
	}
	return r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// withForwardedFor is the client's header with the client's address
// appended to X-Forwarded-For and X-Forwarded-Host set if absent, as the
// inference legs carry them.
func withForwardedFor(r *http.Request) http.Header {
	h := r.Header.Clone()
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		h["X-Forwarded-For"] = []string{ip}
	}
	if h.Get("X-Forwarded-Host") == "" && r.Host != "" {
		h["X-Forwarded-Host"] = []string{r.Host}
	}
	return h
}

// isEventStream reports whether a content type is text/event-stream.
func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// countedBody is the client's body on its way to the gateway: it counts
// the bytes read and keeps the first read error (the cap's
// *http.MaxBytesError among them). The transport may read it from another
// goroutine; nil reads as an empty body.
type countedBody struct {
	r   io.Reader
	mu  sync.Mutex
	n   int
	err error
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.mu.Lock()
	b.n += n
	if err != nil && !errors.Is(err, io.EOF) && b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	return n, err
}

func (b *countedBody) count() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *countedBody) readErr() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// methodNotAllowed answers the methods a served path does not take, so
// they are not relayed: 405 with Allow, an error of dialect d.
func methodNotAllowed(d apierror.Dialect, allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeOwnError(w, r, d, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+", allow: "+allow)
	}
}

// unqueued answers /v1/requests/{id} for the methods ServeQueued does not
// serve: 405 with an async-broker step, 404 without one. Queued requests
// live here, so these paths are never relayed.
func (h *Handler) unqueued(w http.ResponseWriter, r *http.Request) {
	if h.queued == nil {
		notFound(w, r)
		return
	}
	methodNotAllowed(apierror.DialectOpenAI, "GET, HEAD, DELETE")(w, r)
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeOwnError(w, r, apierror.DialectOpenAI, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}
