package rest

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// streamServer runs a server-streaming call on the calling goroutine,
// handing each message to send (service.Channel.ServeStream).
type streamServer interface {
	ServeStream(ctx context.Context, method string, req proto.Message, send func(msg proto.Message, header metadata.MD) error) (metadata.MD, error)
}

// serveStream answers a "stream": true request as server-sent events from
// GenerateStream, run on this goroutine (service.Channel.ServeStream): each
// batch of events the pipeline sends is written and flushed as it comes,
// straight from the message, with no goroutine or copy between. Until the
// first event the response is not committed, so a failure (the decode
// worker's own 4xx included) gets its real status; after it, a failure
// becomes a final error event. The server's write timeout does not cut the
// stream: instead each write must be done within
// server.stream_write_timeout, so a client that stops reading has its
// stream ended, and the failed write ends the call with every leg of it.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, req *coordinatorv1.GenerateStreamRequest) {
	ctx := outgoingMetadata(r.Context(), r.Header)
	rc := http.NewResponseController(w)
	started, writeFailed := false, false
	send := func(m proto.Message, header metadata.MD) error {
		msg, ok := m.(*coordinatorv1.GenerateStreamResponse)
		if !ok {
			return status.Errorf(codes.Internal, "rest: unexpected stream message %T", m)
		}
		if !started {
			started = true
			h.startStream(w, rc, header)
		}
		if err := h.writeEvents(w, rc, msg.GetOpenai().GetData()); err != nil {
			writeFailed = true
			return err // client gone or not reading
		}
		return nil
	}
	header, err := h.streams.ServeStream(ctx, coordinatorv1.CoordinatorService_GenerateStream_FullMethodName, req, send)
	switch {
	case !started && err != nil:
		writeError(w, err)
	case !started:
		h.startStream(w, rc, header) // a stream without events
	case err != nil && !writeFailed:
		st := status.Convert(err)
		bufp := eventBuffers.Get().(*[]byte)
		buf := append((*bufp)[:0], "data: "...)
		buf = appendOpenAIError(buf, apierror.HTTPStatus(st), st.Message(), "")
		buf = append(buf, "\n\n"...)
		h.writeDeadline(rc)
		_, _ = w.Write(buf)
		_ = rc.Flush()
		putEventBuffer(bufp, buf)
	}
}

// startStream commits a stream's response: 200, the SSE headers and the
// step timings (Server-Timing) the call's header metadata carries.
func (h *Handler) startStream(w http.ResponseWriter, rc *http.ResponseController, header metadata.MD) {
	h.writeDeadline(rc)
	hdr := w.Header()
	if v := header.Get("server-timing"); len(v) > 0 {
		hdr.Set("Server-Timing", v[0])
	}
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// writeEvents frames a batch of events and writes and flushes it. The
// framing buffer comes from a pool for the write alone, so an idle stream
// holds none.
func (h *Handler) writeEvents(w http.ResponseWriter, rc *http.ResponseController, events [][]byte) error {
	bufp := eventBuffers.Get().(*[]byte)
	buf := (*bufp)[:0]
	for _, data := range events {
		buf = appendEvent(buf, data)
	}
	h.writeDeadline(rc)
	_, err := w.Write(buf)
	if err == nil {
		err = rc.Flush()
	}
	putEventBuffer(bufp, buf)
	return err
}

// putEventBuffer returns a framing buffer to the pool, unless one huge
// batch grew it.
func putEventBuffer(bufp *[]byte, buf []byte) {
	if cap(buf) <= 1<<20 {
		*bufp = buf[:0]
		eventBuffers.Put(bufp)
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
