package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRESTObservations runs restClient.do against a fake coordinator and
// checks what it records for each way an answer can end.
func TestRESTObservations(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then a client gone cancels r.Context()
		switch r.Header.Get(simFaultHeader) {
		case "prefill=hang":
			w.WriteHeader(http.StatusGatewayTimeout)
			_, _ = w.Write([]byte(`{"error":{"message":"prefill timed out","type":"x","param":null,"code":504}}`))
		case "decode=reset-mid-stream":
			_, _ = w.Write([]byte(sse(1, "")))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // cut the connection
		case "decode=hang":
			<-r.Context().Done()
		default:
			_, _ = w.Write([]byte(sse(3, "")))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until the client leaves
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newRESTClient(srv.URL, 4)
	defer c.http.CloseIdleConnections()
	stream := kindNamed(t, "rest-chat-stream")

	o := c.do(t.Context(), stream, faultNamed(t, "prefill=hang"), []byte(`{}`), nil)
	assert.Equal(t, 504, o.status)
	assert.NoError(t, o.content)
	assert.Equal(t, verdict{class: classFault}, classify(stream, faultNamed(t, "prefill=hang"), o))

	o = c.do(t.Context(), stream, faultNamed(t, "decode=reset-mid-stream"), []byte(`{}`), nil)
	assert.Equal(t, 1, o.chunks)
	require.Error(t, o.cut, "the stream was cut")
	assert.Equal(t, "decode=reset-mid-stream: truncated stream (no [DONE], no error event)",
		classify(stream, faultNamed(t, "decode=reset-mid-stream"), o).cause)

	ctx, cancel := context.WithCancelCause(t.Context())
	o = c.do(ctx, stream, nil, []byte(`{}`), func() { cancel(errDisconnect) })
	assert.True(t, o.cancelled, "%+v", o)
	assert.Equal(t, classDisconnect, classify(stream, nil, o).class)

	ctx, stop := context.WithTimeoutCause(t.Context(), 50*time.Millisecond, errClientTimeout)
	defer stop()
	o = c.do(ctx, stream, faultNamed(t, "decode=hang"), []byte(`{}`), nil)
	assert.True(t, o.timedOut, "%+v", o)
	assert.Nil(t, o.transport)
}
