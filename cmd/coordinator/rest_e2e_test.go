package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

const chatBody = `{"model":"sim-model","messages":[{"role":"user","content":"Hello!"}],"max_tokens":5,"top_k":3}`

func TestRESTChatNonStreaming(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)

	resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Request-Id": {"req-abc-123"}, "Authorization": {"Bearer tok"}})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "req-abc-123", resp.Header.Get("X-Request-Id"))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	for k := range resp.Header {
		assert.False(t, strings.HasPrefix(strings.ToLower(k), "grpc-"), "header %s leaked", k)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &answer))
	require.Len(t, answer.Choices, 1)
	assert.NotEmpty(t, answer.Choices[0].Message.Content)

	legs := s.Legs()
	require.Len(t, legs, 1)
	assert.Equal(t, "decode", legs[0].Profile)
	assert.Equal(t, "/v1/chat/completions", legs[0].Path)
	assert.Equal(t, chatBody, string(legs[0].Body), "a decode-only pipeline sends the client's bytes")
	assert.True(t, headers.IsLegRequestID(legs[0].Header.Get("X-Request-Id"), "req-abc-123"))
	assert.Equal(t, "Bearer tok", legs[0].Header.Get("Authorization"))
}

func TestRESTChatStreaming(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)

	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	events := sseData(t, resp.Body)
	require.GreaterOrEqual(t, len(events), 3)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	var text strings.Builder
	for _, e := range events[:len(events)-1] {
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(e), &chunk), e)
		assert.Equal(t, "chat.completion.chunk", chunk.Object)
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	assert.True(t, strings.HasPrefix(sim.Sentence, strings.TrimSpace(text.String())) || strings.Contains(sim.Sentence, strings.TrimSpace(text.String())),
		"streamed text %q comes from the simulator", text.String())
	assert.Equal(t, resp.Header.Get("X-Request-Id"), s.Legs()[0].Header.Get("X-Request-Id"))
}

func TestRESTCompletionsAndGenerate(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	tests := []struct{ path, body, want string }{
		{"/v1/completions", `{"model":"sim-model","prompt":"Say hi","max_tokens":3}`, `"text"`},
		{"/inference/v1/generate", `{"model":"sim-model","token_ids":[1,2,3],"sampling_params":{"max_tokens":3}}`, `"token_ids"`},
	}
	for _, tt := range tests {
		resp := st.post(t, tt.path, tt.body, nil)
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, tt.want)
	}
	legs := s.Legs()
	require.Len(t, legs, 2)
	assert.Equal(t, "/v1/completions", legs[0].Path)
	assert.Equal(t, "/inference/v1/generate", legs[1].Path)
}

func TestRESTWorkerErrorsReachTheClientUnchanged(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	tests := []struct {
		name   string
		body   string
		header http.Header
		status int
		want   string
	}{
		{name: "unknown model 404", body: `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, status: 404, want: "does not exist"},
		{name: "unknown model 404 while streaming", body: `{"model":"nope","stream":true,"messages":[{"role":"user","content":"x"}]}`, status: 404, want: "does not exist"},
		{name: "worker 503", body: chatBody, header: http.Header{"X-Sim-Fault": {"decode=status:503"}}, status: 503},
		{name: "worker 429 while streaming", body: `{"model":"sim-model","stream":true,"messages":[]}`, header: http.Header{"X-Sim-Fault": {"decode=status:429"}}, status: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := st.post(t, "/v1/chat/completions", tt.body, tt.header)
			body := readAll(t, resp.Body)
			assert.Equal(t, tt.status, resp.StatusCode, body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			assert.Contains(t, e.Error.Message, tt.want)
			assert.NotContains(t, e.Error.Message, "request_id", "the worker's own body, not ours")
		})
	}
}

func TestRESTClientErrors(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		want   string
	}{
		{name: "invalid JSON", path: "/v1/chat/completions", body: `{"model":`, status: 400, want: "invalid JSON body"},
		{name: "JSON null", path: "/v1/chat/completions", body: `null`, status: 400, want: "invalid JSON body"},
		{name: "JSON array", path: "/v1/completions", body: `[1,2]`, status: 400, want: "invalid JSON body"},
		{name: "body over the 1 MB cap", path: "/v1/chat/completions", body: `{"x":"` + strings.Repeat("a", 1<<20) + `"}`, status: 413, want: "request body too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := st.post(t, tt.path, tt.body, http.Header{"X-Request-Id": {"req-7"}})
			body := readAll(t, resp.Body)
			assert.Equal(t, tt.status, resp.StatusCode, body)
			if tt.status == http.StatusRequestEntityTooLarge {
				assert.True(t, resp.Close, "past the cap the connection closes rather than read the rest")
			}
			msg, typ, code := openAIError(t, body)
			assert.Contains(t, msg, tt.want)
			assert.Equal(t, tt.status, code)
			assert.Equal(t, "invalid_request_error", strings.Replace(typ, "not_found_error", "invalid_request_error", 1))
		})
	}
	assert.Empty(t, s.Legs(), "no leg for a rejected request")
}

func TestRESTBodyExactlyAtTheCapIsAccepted(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly)
	prefix, suffix := `{"model":"sim-model","messages":[],"pad":"`, `"}`
	body := prefix + strings.Repeat("a", 1<<20-len(prefix)-len(suffix)) + suffix
	require.Len(t, body, 1<<20)
	resp := st.post(t, "/v1/chat/completions", body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
}

func TestRESTRequestIDs(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	for _, bad := range []string{strings.Repeat("a", 129), "evil id", "x_y"} {
		resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Request-Id": {bad}})
		_ = readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got := resp.Header.Get("X-Request-Id")
		assert.NotEqual(t, bad, got)
		assert.Len(t, got, 36, "a fresh UUID replaces an invalid id")
	}
	for _, leg := range s.Legs() {
		assert.Len(t, leg.Header.Get("X-Request-Id"), 36)
	}
}

func TestRESTClientCannotPickThePhase(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{
		"Epp-Profile": {"prefill"}, "Prefer": {"if-available"}, "Connection": {"keep-alive, x-hop"}, "X-Custom": {"kept"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	leg := s.Legs()[0]
	assert.Equal(t, "decode", leg.Header.Get("EPP-Profile"))
	assert.Empty(t, leg.Header.Get("Prefer"))
	assert.Equal(t, "kept", leg.Header.Get("X-Custom"))
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := st.client.Get(st.restURL + path)
		require.NoError(t, err)
		assert.Equal(t, "ok", readAll(t, resp.Body))
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

func TestWriteTimeoutDoesNotCutAStream(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{TokenDelay: 100 * time.Millisecond})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_WRITE_TIMEOUT": "500ms"}, gw, "", decodeOnly)

	start := time.Now()
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":10,"messages":[]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := sseData(t, resp.Body)
	require.NotEmpty(t, events)
	assert.Equal(t, "[DONE]", events[len(events)-1], "the stream ran to its end")
	assert.Greater(t, time.Since(start), 500*time.Millisecond, "the stream outlived the write timeout")

	// A non-streaming answer slower than the write timeout is cut, as configured.
	resp2, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim-model","max_tokens":10,"messages":[]}`))
	if err == nil {
		_, err = io.ReadAll(resp2.Body)
		resp2.Body.Close()
	}
	assert.Error(t, err, "the write deadline still bounds non-streaming requests")
}
