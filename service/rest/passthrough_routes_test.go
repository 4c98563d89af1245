package rest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// Which paths the passthrough takes, and which it leaves to the routes.

func TestPassthroughLeavesServedPathsAlone(t *testing.T) {
	t.Parallel()
	gw, hits := startGateway(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	f := startPassFront(t, gw, passOptions{})
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{method: http.MethodGet, path: "/v1/chat/completions", status: http.StatusMethodNotAllowed, allow: "POST"},
		{method: http.MethodPut, path: "/v1/completions", status: http.StatusMethodNotAllowed, allow: "POST"},
		{method: http.MethodGet, path: "/inference/v1/generate", status: http.StatusMethodNotAllowed, allow: "POST"},
		{method: http.MethodPost, path: "/healthz", status: http.StatusMethodNotAllowed, allow: "GET, HEAD"},
		{method: http.MethodDelete, path: "/metrics", status: http.StatusMethodNotAllowed, allow: "GET, HEAD"},
		{method: http.MethodPost, path: "/openapi.json", status: http.StatusMethodNotAllowed, allow: "GET, HEAD"},
		{method: http.MethodGet, path: "/v1/requests/job-1", status: http.StatusNotFound},
		{method: http.MethodGet, path: "/healthz", status: http.StatusOK},
		{method: http.MethodGet, path: "/readyz", status: http.StatusServiceUnavailable},
		{method: http.MethodGet, path: "/openapi.json", status: http.StatusOK},
		{method: http.MethodGet, path: "/metrics", status: http.StatusOK},
	}
	for _, tt := range tests {
		req := newRequest(t, tt.method, f.url+tt.path, nil)
		req.Header.Set("X-Request-Id", "rid-405")
		resp, body := f.do(t, req)
		assert.Equal(t, tt.status, resp.StatusCode, "%s %s: %s", tt.method, tt.path, body)
		assert.Equal(t, tt.allow, resp.Header.Get("Allow"), "%s %s", tt.method, tt.path)
		if tt.status >= 400 && tt.path != "/readyz" {
			msg, _, code := openAIError(t, body)
			assert.Equal(t, tt.status, code)
			assert.Equal(t, "rid-405", resp.Header.Get("X-Request-Id"), "%s %s", tt.method, tt.path)
			assert.True(t, strings.HasSuffix(msg, " (request_id: rid-405)"), "%s %s: %s", tt.method, tt.path, msg)
		}
		if tt.allow != "" {
			msg, _, _ := openAIError(t, body)
			assert.Equal(t, "method "+tt.method+" not allowed on "+tt.path+", allow: "+tt.allow+" (request_id: rid-405)", msg)
		}
	}
	// The Responses route errs in OpenAI's shape (above), the Messages one in Anthropic's.
	req := newRequest(t, http.MethodGet, f.url+"/v1/responses", nil)
	req.Header.Set("X-Request-Id", "rid-405")
	resp, body := f.do(t, req)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
	msg, _, _ := openAIError(t, body)
	assert.Equal(t, "method GET not allowed on /v1/responses, allow: POST (request_id: rid-405)", msg)
	req = newRequest(t, http.MethodPut, f.url+"/v1/messages", nil)
	req.Header.Set("X-Request-Id", "rid-405")
	resp, body = f.do(t, req)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
	assert.Equal(t, `{"type":"error","error":{"type":"invalid_request_error","message":"method PUT not allowed on /v1/messages, allow: POST (request_id: rid-405)"}}`, body)
	assert.Zero(t, hits.Load(), "served paths never reach the gateway")

	noRedirect := &http.Client{Transport: f.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(newRequest(t, http.MethodGet, f.url+"//v1/./models?x=1", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode, "ServeMux cleans a path before any route sees it")
	assert.Equal(t, "/v1/models?x=1", resp.Header.Get("Location"))
	assert.Zero(t, hits.Load())

	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		resp, _ := f.do(t, newRequest(t, method, f.url+"/v1/chat/completions/extra", nil))
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s below an inference route is not relayed", method)
		resp, _ = f.do(t, newRequest(t, method, f.url+"/v1/models/extra", nil))
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s on an unserved path is relayed", method)
	}
}

func TestQueuedRequestPathsWithABroker(t *testing.T) {
	t.Parallel()
	gw, hits := startGateway(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	c, err := gateway.New(gateway.Options{Address: gw})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h := testHandler(t, nil, Options{Queued: anyStore{}, Passthrough: &Passthrough{Gateway: c, Log: slog.New(slog.DiscardHandler)}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/requests/job-1", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD, DELETE", w.Header().Get("Allow"))
	assert.Zero(t, hits.Load())
}

func TestWithoutPassthroughUnservedPathsAre404(t *testing.T) {
	t.Parallel()
	h := openAPIHandler(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
	msg, _, _ := openAIError(t, w.Body.String())
	id := w.Header().Get("X-Request-Id")
	assert.Len(t, id, 36, "a fresh id")
	assert.Equal(t, "no route for GET /v1/models (request_id: "+id+")", msg)
}
