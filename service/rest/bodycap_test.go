package rest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// rawExchange sends head (a request line and headers, no body) on a new
// connection and reads the first response: a 100 Continue if the server
// asked for the body, else its answer. It then sends late bytes of body
// (a client that did not wait for a 100 Continue) and reports whether the
// server closed the connection.
func rawExchange(t *testing.T, addr, head string, late int) (resp *http.Response, body string, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, head)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if late > 0 {
		_, err = conn.Write(make([]byte, late))
		require.NoError(t, err)
	}
	_, err = br.ReadByte()
	return resp, string(b), err == io.EOF
}

// TestDeclaredBodyOverTheCapIsRefusedOnTheHeader: on every route, a
// Content-Length past the cap is answered 413 at once, from the headers
// alone: no 100 Continue to a client that asked before sending its body,
// an OpenAI error with the request id, and the connection closed: at once
// when what is left is too large to discard (net/http reads at most
// 256 KiB of a body its handler left, to avoid a reset losing the answer),
// else once those bytes came. The inference and passthrough routes count
// it in the metrics.
func TestDeclaredBodyOverTheCapIsRefusedOnTheHeader(t *testing.T) {
	t.Parallel()
	gw, hits := startGateway(t, func(http.ResponseWriter, *http.Request) {})
	const maxBody = 4 << 10
	f := startPassFront(t, gw, passOptions{maxBody: maxBody})
	addr := strings.TrimPrefix(f.url, "http://")
	tests := []struct {
		name, method, path string
		endpoint           string // the metrics' endpoint label, if counted
	}{
		{name: "chat", method: http.MethodPost, path: "/v1/chat/completions", endpoint: "chat"},
		{name: "completions", method: http.MethodPost, path: "/v1/completions", endpoint: "completions"},
		{name: "generate", method: http.MethodPost, path: "/inference/v1/generate", endpoint: "generate"},
		{name: "passthrough", method: http.MethodPost, path: "/v1/embeddings", endpoint: endpointPassthrough},
		{name: "served path, another method", method: http.MethodPut, path: "/v1/chat/completions"},
		{name: "health", method: http.MethodGet, path: "/healthz"},
		{name: "queued request", method: http.MethodGet, path: "/v1/requests/abc"},
	}
	for _, tt := range tests {
		for _, declared := range []int{1e12, maxBody + 1} {
			t.Run(fmt.Sprint(tt.name, "/", declared), func(t *testing.T) {
				late := 0 // a terabyte is not discarded: the connection closes at once
				if declared < 1<<18 {
					late = declared
				}
				id := fmt.Sprint("cap-", declared)
				head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\n"+
					"X-Request-Id: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", tt.method, tt.path, id, declared)
				resp, body, closed := rawExchange(t, addr, head, late)
				require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the refusal, not a 100 Continue: %s", body)
				assert.True(t, resp.Close, "Connection: close")
				assert.True(t, closed, "the connection is not used again")
				assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				assert.Equal(t, id, resp.Header.Get("X-Request-Id"))
				msg, typ, code := openAIError(t, body)
				assert.Equal(t, http.StatusRequestEntityTooLarge, code)
				assert.Equal(t, "invalid_request_error", typ)
				assert.Equal(t, fmt.Sprintf("request body too large: content-length %d exceeds the limit of 4096 bytes (request_id: %s)", declared, id), msg)
			})
		}
		if tt.endpoint != "" { // counted as the handler returns, after the client may have its answer
			assert.Eventually(t, func() bool {
				return counter(t, f.metrics, "coordinator_requests_total",
					map[string]string{"api": "rest", "endpoint": tt.endpoint, "status": "413"}) == 2
			}, 5*time.Second, time.Millisecond, tt.name)
		}
	}
	assert.Zero(t, hits.Load(), "nothing reaches the gateway")

	// At the cap the body is asked for: the refusal is for bodies past it.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, "POST /v1/embeddings HTTP/1.1\r\nHost: coordinator\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusContinue, resp.StatusCode)
	// An invalid request id is replaced, as on every answer.
	resp, _, _ = rawExchange(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: coordinator\r\nX-Request-Id: bad id\r\nContent-Length: 5000\r\n\r\n", 5000)
	assert.True(t, headers.ValidRequestID(resp.Header.Get("X-Request-Id")), resp.Header.Get("X-Request-Id"))
}
