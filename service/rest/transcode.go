package rest

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/inproc"
	"github.com/coordinator-project/coordinator/internal/requestbody"
)

// noForm is the PostForm of every request the front hands the gateway:
// set, so that the generated handlers' ParseForm parses nothing.
var noForm = url.Values{}

// jsonContentType is the Content-Type of every request the front hands the
// gateway: the body has been checked to be a JSON object (and a form type
// would make the generated handler parse the body as a form).
var jsonContentType = []string{"application/json"}

// transcode hands one checked inference request to the generated gateway
// handler of Generate, or of GenerateStream when stream is set, with doc,
// the one parse of its body, in the call's context (frontdoor.With; the
// exchange holds the frontdoor.Call, in the request's one allocation): the body becomes
// openai.json, the query exactly openai.endpoint and request_id
// (the client's query is not used on these routes), handed over parsed as
// the request's Form (frontQuery reads it). The gateway does the
// call, its metadata both ways (headers.MetadataKey, headers.ResponseKey),
// the answer's framing (rawJSON) and its errors (gatewayError,
// streamError); answerWriter gives a stream's error before its first
// event the REST front's status and body, and bounds each write of a
// stream.
func (h *Handler) transcode(w http.ResponseWriter, r *http.Request, b binding, c call, doc *requestbody.Document, stream bool) {
	x := &exchange{call: c, body: bodyReader{data: doc.Bytes()}, url: *r.URL}
	x.w = answerWriter{ResponseWriter: w, call: &x.call, stream: stream, h: h}
	x.door.Doc = doc
	ctx := frontdoor.With(r.Context(), &x.door)
	ctx = inproc.WithHandOver(ctx, &x.handOver) // its messages by reference: it built and bounded them
	if c.minted {                               // the service sends it on the legs as it is (compat D25)
		ctx = headers.WithMintedRequestID(ctx)
	}
	gr := r.WithContext(withCall(ctx, &x.call))
	x.url.Path, x.url.RawPath, x.url.RawQuery = b.path, "", ""
	if stream {
		x.url.Path = b.streamPath
	}
	gr.URL = &x.url
	gr.Form, gr.PostForm = url.Values{queryEndpoint: b.endpoint, queryRequestID: {c.id}}, noForm
	// grpc-gateway would make X-Forwarded-Host the client's Host and add its
	// address to X-Forwarded-For: the legs carry the client's own values, as
	// over gRPC (compat §3.4).
	gr.Host, gr.RemoteAddr = "", ""
	gr.Header["Content-Type"] = b.contentType
	gr.Body = &x.body
	if stream { // one the gateway stopped receiving (a failed write) ends once it is done with its messages
		defer x.handOver.End()
	}
	h.gateway.ServeHTTP(&x.w, gr)
	x.w.finish()
}

// exchange is the front's state of one transcoded request, in one
// allocation.
type exchange struct {
	call     call
	door     frontdoor.Call
	handOver inproc.HandOver
	body     bodyReader
	url      url.URL
	w        answerWriter
}

// streamError is the gateway's stream error handler. Before the first
// event it keeps err for answerWriter, which writes it as writeError does
// (the decode worker's relayed status and body, Retry-After, ...): the
// gateway alone would answer with its own code mapping
// (runtime.HTTPStatusFromCode). After it, the status it returns becomes
// the final error event (marshalEvents), naming the request id.
func streamError(ctx context.Context, err error) *status.Status {
	st := status.Convert(err)
	c := callOf(ctx)
	if c == nil {
		return st
	}
	if c.err == nil {
		c.err = err
	}
	return withRequestID(st, c.id)
}

// answerWriter is the ResponseWriter the front hands the gateway for one
// inference request. A WriteHeader before anything was written while the
// call holds a stream error writes that error with writeError instead, and
// drops the gateway's own error bytes. The first write of a stream adds
// its headers; each write of a stream must be done within
// server.stream_write_timeout (the server's write timeout does not cut a
// stream).
type answerWriter struct {
	http.ResponseWriter
	call   *call
	stream bool
	h      *Handler
	rc     *http.ResponseController // made at its first use (controller)
	// committed: the status went out; dropped: an error of ours went out
	// in the gateway's place; flushed: the stream was flushed once.
	committed, dropped, flushed bool
}

func (w *answerWriter) WriteHeader(code int) {
	switch {
	case w.dropped || w.committed:
		return
	case w.call.err != nil:
		w.dropped = true
		w.Header().Del("Content-Type") // the gateway's, for its own error
		if w.stream {
			w.writeDeadline()
		}
		writeError(w.ResponseWriter, w.call.dialect, w.call.err)
		return
	}
	w.commit()
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	if w.dropped {
		return len(b), nil
	}
	if !w.committed {
		w.commit()
	}
	if w.stream && len(b) > 0 {
		w.writeDeadline()
	}
	return w.ResponseWriter.Write(b)
}

// commit notes the answer's status is going out; a stream's gets its
// headers.
func (w *answerWriter) commit() {
	w.committed = true
	if w.stream {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
}

// finish answers a stream that ended without an event or an error: 200
// and no events.
func (w *answerWriter) finish() {
	if w.stream && !w.committed && !w.dropped {
		w.Header().Set("Content-Type", contentTypeEventStream)
		w.WriteHeader(http.StatusOK)
	}
}

// FlushError is the gateway's flush of a stream (through
// http.ResponseController). The first one writes the answer's header, in
// net/http's chunkWriter.writeHeader, whose frame alone is 2.8 KB; the
// gateway flushes about 4.9 KB deep into the connection's goroutine, so
// there the header would double that goroutine's stack to 16 KiB, which it
// keeps for as long as the stream is open. The first flush runs on a
// goroutine of its own instead, which ends with it; the connection's
// goroutine waits for it, and panics with its panic.
func (w *answerWriter) FlushError() error {
	rc := w.controller()
	if w.flushed || !w.stream {
		return rc.Flush()
	}
	w.flushed = true
	done := make(chan flushOutcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- flushOutcome{panicked: p}
			}
		}()
		done <- flushOutcome{err: rc.Flush()}
	}()
	r := <-done
	if r.panicked != nil { // net/http recovers a handler's panic, not this goroutine's
		panic(r.panicked)
	}
	return r.err
}

// flushOutcome is the outcome of a flush run on a goroutine of its own.
type flushOutcome struct {
	err      error
	panicked any
}

// Unwrap lets http.ResponseController reach the connection (flush, write
// deadlines).
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeDeadline bounds the stream's next write.
func (w *answerWriter) writeDeadline() { w.h.writeDeadline(w.controller()) }

// controller is the connection's ResponseController, made at its first use.
func (w *answerWriter) controller() *http.ResponseController {
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	return w.rc
}

// writeDeadline gives the next write of a stream stream_write_timeout
// (none when 0).
func (h *Handler) writeDeadline(rc *http.ResponseController) {
	var deadline time.Time
	if h.streamWriteTimeout > 0 {
		deadline = time.Now().Add(h.streamWriteTimeout)
	}
	_ = rc.SetWriteDeadline(deadline)
}
