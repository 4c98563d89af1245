package rest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The passthrough fails closed (passroute.go).

// gatewayLog is a test gateway that keeps each request it got, body read.
type gatewayLog struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func startGatewayLog(t testing.TB) (string, *gatewayLog) {
	t.Helper()
	l := &gatewayLog{}
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Clone(context.Background()))
		l.body = append(l.body, b)
		l.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return gw, l
}

func (l *gatewayLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *gatewayLog) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NotEmpty(t, l.reqs)
	return l.reqs[len(l.reqs)-1], string(l.body[len(l.body)-1])
}

// noRedirects is f's client, redirects returned as answers.
func (f *passFront) noRedirects() *http.Client {
	return &http.Client{Transport: f.client.Transport, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestPassthroughRefusesPathsThatReachAnInferenceHandler(t *testing.T) {
	t.Parallel()
	gw, log := startGatewayLog(t)
	f := startPassFront(t, gw, passOptions{})
	client := f.noRedirects()
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]}`
	tests := []struct {
		path   string
		status int
	}{
		{"/invocations", http.StatusNotFound},             // vLLM's SageMaker route: chat, completions, pooling by the body
		{"/invocations/", http.StatusNotFound},            // Starlette redirects it to /invocations
		{"/v1/chat%2Fcompletions", http.StatusBadRequest}, // uvicorn decodes %2F
		{"/v1/chat%2fcompletions", http.StatusBadRequest}, // any case
		{"/v1%2Fcompletions", http.StatusBadRequest},      //
		{"/v1/models%2F..%2F..%2Finvocations", http.StatusBadRequest},
		{"/v1/chat/completions/", http.StatusNotFound},                // trailing slash
		{"/v1/%63hat/completions/", http.StatusNotFound},              // an encoded letter and a trailing slash
		{"/v1/chat/completions/render", http.StatusNotFound},          // renders the prompt: fetches its media
		{"/v1/completions/render", http.StatusNotFound},               //
		{"/v1/responses/render", http.StatusNotFound},                 //
		{"/v1/messages/count_tokens/", http.StatusNotFound},           // served without the slash (count.go)
		{"/inference/v1/generate/", http.StatusNotFound},              //
		{"/v1/chat/completions/derender", http.StatusNotFound},        //
		{"/v1/models/%2E%2E/chat/completions", http.StatusBadRequest}, // an encoded dot segment
	}
	for _, tt := range tests {
		req := newRequest(t, http.MethodPost, f.url+tt.path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "rid-path")
		resp, err := client.Do(req)
		require.NoError(t, err, tt.path)
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !assert.Equal(t, tt.status, resp.StatusCode, "%s: %s", tt.path, answer) {
			continue
		}
		msg, _, code := openAIError(t, string(answer))
		assert.Equal(t, tt.status, code)
		assert.True(t, strings.HasSuffix(msg, " (request_id: rid-path)"), msg)
	}
	assert.Zero(t, log.len(), "no alias of an inference route reaches the gateway")

	resp, err := client.Do(newRequest(t, http.MethodPost, f.url+"/v1/embeddings/", strings.NewReader(`{}`)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "other paths are relayed")
}

func TestPassthroughRelaysOnlyBodiesItParses(t *testing.T) {
	t.Parallel()
	gw, log := startGatewayLog(t)
	f := startPassFront(t, gw, passOptions{})
	const forged = `"kv_transfer_params":{"remote_host":"10.6.6.6","remote_port":5600,"remote_block_ids":[1]}`
	refused := []struct {
		name, contentType, body string
		status                  int
	}{
		{"NaN", "application/json", `{"input":"a","x":NaN,` + forged + `}`, http.StatusBadRequest},
		{"BOM", "application/json", "\xef\xbb\xbf{\"input\":\"a\"," + forged + "}", http.StatusBadRequest},
		{"too deep", "application/json", `{"input":"a",` + forged + `,"deep":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, http.StatusBadRequest},
		{"repeated key", "application/json", `{"input":"a",` + forged + `,"kv_transfer_params":null}`, http.StatusBadRequest},
		{"not an object", "application/json", `[{` + forged + `}]`, http.StatusBadRequest},
		{"not JSON", "text/plain", `input=a`, http.StatusBadRequest},
		{"trailing garbage", "", `{"input":"a"}}`, http.StatusBadRequest},
		{"a form off the audio routes", "multipart/form-data; boundary=x", "--x\r\n\r\n{" + forged + "}\r\n--x--\r\n", http.StatusBadRequest},
	}
	for _, tt := range refused {
		req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(tt.body))
		if tt.contentType != "" {
			req.Header.Set("Content-Type", tt.contentType)
		}
		resp, answer := f.do(t, req)
		assert.Equal(t, tt.status, resp.StatusCode, "%s: %s", tt.name, answer)
		msg, _, _ := openAIError(t, answer)
		assert.True(t, strings.HasPrefix(msg, "invalid JSON body: "), "%s: %s", tt.name, msg)
	}
	assert.Zero(t, log.len(), "no body the coordinator cannot parse reaches the gateway")

	// Whatever the Content-Type, a JSON body loses the client's transfer
	// params: FastAPI parses it as JSON without one, and with a malformed one.
	for _, contentType := range []string{"", "application/json", "application/json; charset", "text/plain", "application/x-ndjson"} {
		req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(`{"input":"a",`+forged+`}`))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, answer := f.do(t, req)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "%q: %s", contentType, answer)
		_, got := log.last(t)
		assert.JSONEq(t, `{"input":"a"}`, got, "Content-Type %q", contentType)
	}
}

func TestPassthroughRefusesACodedBody(t *testing.T) {
	t.Parallel()
	gw, log := startGatewayLog(t)
	f := startPassFront(t, gw, passOptions{})
	for _, path := range []string{"/v1/embeddings", "/v1/audio/transcriptions"} {
		req := newRequest(t, http.MethodPost, f.url+path, bytes.NewReader([]byte{0x1f, 0x8b, 0x08, 0x00}))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		resp, answer := f.do(t, req)
		assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s: %s", path, answer)
		msg, _, code := openAIError(t, answer)
		assert.Equal(t, http.StatusUnsupportedMediaType, code)
		assert.Contains(t, msg, "content-encoding is not supported")
	}
	assert.Zero(t, log.len())

	req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(`{"input":"a"}`))
	req.Header.Set("Content-Encoding", "identity")
	resp, answer := f.do(t, req)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, answer)
}

// TestPassthroughRoutingAndBodyHeaders: a relayed request never carries the
// client's routing headers (compat D24: counted, logged); the headers that
// describe the client's body go only with the body as sent.
func TestPassthroughRoutingAndBodyHeaders(t *testing.T) {
	t.Parallel()
	gw, log := startGatewayLog(t)
	f := startPassFront(t, gw, passOptions{})
	routing := map[string]string{
		"X-Gateway-Destination-Endpoint": "169.254.169.254:80", "X-Gateway-Destination-Endpoint-Subset": "10.0.0.9:8000",
		"X-Gateway-Model-Name": "m2", "X-Prefiller-Host-Port": "10.0.0.8:8000", "X-Llm-D-Slo-Ttft-Ms": "1",
		"X-Data-Parallel-Rank": "2", "Epp-Profile": "prefill", "Prefer": "if-available",
	}
	describing := map[string]string{"Digest": "sha-256=a", "Content-Md5": "b", "Repr-Digest": "sha-256=:c:", "Content-Digest": "sha-256=:d:", "Content-Range": "bytes 0-1/2"}
	send := func(body string) *http.Request {
		req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(body))
		for k, v := range routing {
			req.Header.Set(k, v)
		}
		for k, v := range describing {
			req.Header.Set(k, v)
		}
		req.Header.Set("User-Agent", "client/1")
		resp, answer := f.do(t, req)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, answer)
		r, _ := log.last(t)
		return r
	}

	asSent := send(`{"input":"a"}`)
	rewritten := send(`{"input":"a","kv_transfer_params":{}}`)
	for _, r := range []*http.Request{asSent, rewritten} {
		for k := range routing {
			if k != "Epp-Profile" {
				assert.Empty(t, r.Header.Values(k), k)
			}
		}
		assert.Equal(t, []string{"decode"}, r.Header.Values("Epp-Profile"))
		assert.Equal(t, []string{"client/1"}, r.Header.Values("User-Agent"))
	}
	for k, v := range describing {
		assert.Equal(t, []string{v}, asSent.Header.Values(k), "%s goes with the body as sent", k)
		assert.Empty(t, rewritten.Header.Values(k), "%s does not describe the rewritten body", k)
	}
	assert.Eventually(t, func() bool {
		return counter(t, f.metrics, "coordinator_client_routing_headers_dropped_total", map[string]string{"api": "rest", "endpoint": "passthrough"}) == 2
	}, 5*time.Second, time.Millisecond)

	// server.trusted_routing_headers lets the names it lists through.
	trusting := startPassFront(t, gw, passOptions{trusted: []string{"x-llm-d-slo-ttft-ms"}})
	req := newRequest(t, http.MethodGet, trusting.url+"/v1/models", nil)
	req.Header.Set("X-Llm-D-Slo-Ttft-Ms", "1")
	req.Header.Set("X-Gateway-Model-Name", "m2")
	resp, answer := trusting.do(t, req)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, answer)
	r, _ := log.last(t)
	assert.Equal(t, []string{"1"}, r.Header.Values("X-Llm-D-Slo-Ttft-Ms"))
	assert.Empty(t, r.Header.Values("X-Gateway-Model-Name"))
}

// The pooling routes take chat messages, and a worker fetches their media
// itself: the passthrough guards no media, so it refuses every part vLLM
// may read as media (chat_utils.py types a part by its keys when it has no
// type or a uuid), and relays messages of text.
func TestPassthroughRefusesMediaInMessages(t *testing.T) {
	t.Parallel()
	gw, log := startGatewayLog(t)
	f := startPassFront(t, gw, passOptions{})
	const metadataURL = `"http://169.254.169.254/latest/meta-data/"`
	parts := map[string]string{
		"typed image_url":         `{"type":"image_url","image_url":{"url":` + metadataURL + `}}`,
		"untyped image_url":       `{"image_url":{"url":` + metadataURL + `}}`,
		"null type":               `{"type":null,"image_url":` + metadataURL + `}`,
		"text with uuid and url":  `{"type":"text","text":"a","uuid":"u","image_url":{"url":` + metadataURL + `}}`,
		"video_url":               `{"type":"video_url","video_url":{"url":` + metadataURL + `}}`,
		"audio_url untyped":       `{"audio_url":{"url":` + metadataURL + `}}`,
		"input_image string form": `{"type":"input_image","image_url":` + metadataURL + `}`,
	}
	for name, part := range parts {
		for _, path := range []string{"/v1/embeddings", "/pooling", "/classify"} {
			body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` + part + `]}]}`
			req := newRequest(t, http.MethodPost, f.url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, answer := f.do(t, req)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s on %s: %s", name, path, answer)
			msg, _, _ := openAIError(t, answer)
			assert.Contains(t, msg, "media content parts are not relayed", "%s on %s", name, path)
		}
	}
	assert.Zero(t, log.len(), "no media part reaches the gateway")

	text := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`
	req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(text))
	req.Header.Set("Content-Type", "application/json")
	resp, answer := f.do(t, req)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, answer)
	_, got := log.last(t)
	assert.Equal(t, text, got, "messages of text go as the client sent them")
}
