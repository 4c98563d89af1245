package rest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// serveStream answers a "stream": true request as server-sent events from
// GenerateStream. Until the first event the response is not committed, so
// a failure (the decode worker's own 4xx included) gets its real status;
// after it, a failure becomes a final error event. Every event is flushed
// as it arrives. The server's write timeout does not cut the stream:
// instead each write must be done within server.stream_write_timeout, so a
// client that stops reading has its stream ended, and returning cancels
// the call with every leg of it.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, req *coordinatorv1.GenerateStreamRequest) {
	ctx := metadata.NewOutgoingContext(r.Context(), headers.ToMetadata(r.Header))
	stream, err := h.client.GenerateStream(ctx, req)
	if err != nil {
		writeError(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	h.writeDeadline(rc)
	hdr := w.Header()
	if md, err := stream.Header(); err == nil {
		if v := md.Get("server-timing"); len(v) > 0 {
			hdr.Set("Server-Timing", v[0])
		}
	}
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if errors.Is(err, io.EOF) {
		return
	}
	bufp := eventBuffers.Get().(*[]byte)
	defer func() {
		if cap(*bufp) <= 1<<20 {
			eventBuffers.Put(bufp)
		}
	}()
	buf := (*bufp)[:0]
	defer func() { *bufp = buf }()
	msg := first
	for {
		buf = buf[:0]
		for _, data := range msg.GetOpenai().GetData() {
			buf = appendEvent(buf, data)
		}
		h.writeDeadline(rc)
		if _, err := w.Write(buf); err != nil {
			return // client gone or not reading: its context cancels the call
		}
		if err := rc.Flush(); err != nil {
			return
		}
		msg, err = stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			st := status.Convert(err)
			buf = append(buf[:0], "data: "...)
			buf = apierror.AppendOpenAIError(buf, apierror.HTTPStatus(st), st.Message(), "")
			buf = append(buf, "\n\n"...)
			h.writeDeadline(rc)
			_, _ = w.Write(buf)
			_ = rc.Flush()
			return
		}
	}
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

// eventBuffers recycles the SSE framing buffers across streams.
var eventBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// appendEvent frames data as one server-sent event; a multi-line payload
// becomes one data field per line.
func appendEvent(dst, data []byte) []byte {
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(dst, '\n')
}
