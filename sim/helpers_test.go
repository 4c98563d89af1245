package sim

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testEnv is a Sim served on loopback: gateway, render and a direct worker.
type testEnv struct {
	sim     *Sim
	gateway *httptest.Server
	render  *httptest.Server
	worker  *httptest.Server
}

func newTestEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	s := New(opts)
	e := &testEnv{
		sim:     s,
		gateway: httptest.NewServer(s.Gateway()),
		render:  httptest.NewServer(s.Render()),
		worker:  httptest.NewServer(s.Worker()),
	}
	t.Cleanup(func() {
		e.gateway.Close()
		e.render.Close()
		e.worker.Close()
	})
	return e
}

// strictEnv is the usual test setup: strict, no delays, 3 output tokens.
func strictEnv(t *testing.T) *testEnv {
	return newTestEnv(t, Options{Strict: true, OutputTokens: 3})
}

// legHeader is what the coordinator stamps on a gateway leg.
func legHeader(profile, requestID string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	if profile != "" {
		h.Set(ProfileHeader, profile)
	}
	return h
}

// response is a fully read HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func doRequest(t *testing.T, ctx context.Context, method, url string, h http.Header, body string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func post(t *testing.T, url string, h http.Header, body string) response {
	t.Helper()
	return doRequest(t, t.Context(), http.MethodPost, url, h, body)
}

// jsonOf decodes a response body into T.
func jsonOf[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

// sseData splits an SSE body into its data payloads, checking the framing.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			require.Empty(t, line, "events end with a blank line")
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		require.True(t, ok, "line %q is not a data line", line)
		out = append(out, data)
		expectBlank = true
	}
	require.NoError(t, sc.Err())
	return out
}

// errorOf decodes a vLLM-shaped error body.
func errorOf(t *testing.T, b []byte) errorDetail {
	t.Helper()
	return jsonOf[errorBody](t, b).Error
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func mustBase64(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}
