package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// fullPipeline is the cascade `make run` uses: render, conditional-decode,
// encode, prefill and decode with the NIXL connectors.
const fullPipeline = `
pipeline:
  kv_connector: kv-nixl
  ec_connector: ec-nixl
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: conditional-decode
    - type: encode
    - type: prefill
    - type: decode
`

// legSummary is "service:profile:path[:if-available]" for each leg.
func legSummary(legs []sim.Leg) []string {
	out := make([]string, len(legs))
	for i, l := range legs {
		s := l.Service + ":" + l.Profile + ":" + l.Path
		if l.Header.Get("Prefer") != "" {
			s += ":" + l.Header.Get("Prefer")
		}
		out[i] = s
	}
	return out
}

// field decodes one top-level field of a leg body.
func field(t *testing.T, body []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return m[key]
}

const imageURL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="

func TestCascadeTextChatWithPrefillThenCacheHit(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	body := `{"model":"sim-model","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":6,"min_tokens":2}`

	resp := st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	legs := s.Legs()
	assert.Equal(t, []string{
		"render::/v1/chat/completions/render",
		"gateway:decode:/v1/chat/completions:if-available",
		"gateway:prefill:/v1/chat/completions",
		"gateway:decode:/v1/chat/completions",
	}, legSummary(legs))
	prefill, decode := legs[2].Body, legs[3].Body
	assert.JSONEq(t, "1", string(field(t, prefill, "max_tokens")))
	assert.Nil(t, field(t, prefill, "min_tokens"))
	assert.JSONEq(t, "false", string(field(t, prefill, "stream")))
	assert.JSONEq(t, "6", string(field(t, decode, "max_tokens")), "decode keeps the client's sampling")
	assert.JSONEq(t, "2", string(field(t, decode, "min_tokens")))
	assert.Contains(t, string(field(t, decode, "kv_transfer_params")), sim.PrefillEngineID)
	assert.Equal(t, string(field(t, prefill, "tokens")), string(field(t, decode, "tokens")), "render's token IDs on both legs")

	before := len(s.Legs()) // Reset would also forget the served prompts
	resp = st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, []string{
		"render::/v1/chat/completions/render",
		"gateway:decode:/v1/chat/completions:if-available",
	}, legSummary(s.Legs()[before:]), "a cached prefix is answered by conditional-decode alone")
}

func TestCascadeImageChatStreamsThroughEncodePrefillDecode(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	body := `{"model":"sim-model","stream":true,"max_tokens":4,"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]}]}`

	resp := st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := sseData(t, resp.Body)
	require.NotEmpty(t, events)
	assert.Equal(t, "[DONE]", events[len(events)-1])

	legs := s.Legs()
	require.Equal(t, []string{
		"render::/v1/chat/completions/render",
		"gateway:decode:/v1/chat/completions:if-available",
		"gateway:encode:/v1/chat/completions",
		"gateway:prefill:/v1/chat/completions",
		"gateway:decode:/v1/chat/completions",
	}, legSummary(legs))
	hash := sim.ImageHash(imageURL)
	assert.Contains(t, string(legs[2].Body), hash, "encode gets the image's hash")
	assert.Contains(t, string(field(t, legs[3].Body, "ec_transfer_params")), hash, "prefill gets the encoder's descriptor")
	assert.Nil(t, field(t, legs[4].Body, "ec_transfer_params"), "never on decode")
	assert.Contains(t, string(legs[4].Body), `"uuid":"`+hash+`"`)
	id := legs[0].Header.Get("X-Request-Id")
	for _, l := range legs {
		assert.True(t, headers.IsLegRequestID(l.Header.Get("X-Request-Id"), id), "one id on every leg, render included (D5)")
	}
}

func TestCascadeCompletionsAndGenerate(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	tests := []struct {
		name, path, body string
		legs             []string
	}{
		{name: "string prompt is rendered", path: "/v1/completions", body: `{"model":"sim-model","prompt":"Once upon a time","max_tokens":3}`,
			legs: []string{"render::/v1/completions/render", "gateway:decode:/v1/completions:if-available", "gateway:prefill:/v1/completions", "gateway:decode:/v1/completions"}},
		{name: "token prompt skips render", path: "/v1/completions", body: `{"model":"sim-model","prompt":[101,202,303],"max_tokens":3}`,
			legs: []string{"gateway:decode:/v1/completions:if-available", "gateway:prefill:/v1/completions", "gateway:decode:/v1/completions"}},
		{name: "generate is tokens-in", path: "/inference/v1/generate", body: `{"model":"sim-model","token_ids":[7,8,9],"sampling_params":{"max_tokens":3}}`,
			legs: []string{"gateway:decode:/inference/v1/generate:if-available", "gateway:prefill:/inference/v1/generate", "gateway:decode:/inference/v1/generate"}},
	}
	for _, tt := range tests {
		s.Reset()
		resp := st.post(t, tt.path, tt.body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, tt.name+": "+readAll(t, resp.Body))
		legs := s.Legs()
		require.Equal(t, tt.legs, legSummary(legs), tt.name)
		last := legs[len(legs)-1].Body
		if tt.path == "/v1/completions" {
			assert.True(t, strings.HasPrefix(string(field(t, last, "prompt")), "["), "%s: decode gets token IDs", tt.name)
		} else {
			assert.JSONEq(t, `[7,8,9]`, string(field(t, last, "token_ids")))
			assert.Contains(t, string(field(t, last, "sampling_params")), `"do_remote_prefill":true`)
		}
	}
}

func TestCascadeOverGRPCStream(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	stream, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
		RequestId: "grpc-cascade-1",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS,
			Json: []byte(`{"model":"sim-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":[` +
				`{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]}]}`),
		}},
	})
	require.NoError(t, err)
	events := recvEvents(t, stream)
	require.Greater(t, len(events), 1)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	assert.Len(t, s.Legs(), 5)
}

func TestCascadeTokensInFormatForEncodeAndPrefill(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, strings.Replace(fullPipeline, "  kv_connector: kv-nixl", "  use_openai_format: false\n  kv_connector: kv-nixl", 1))
	body := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]}]}`
	resp := st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, []string{
		"render::/v1/chat/completions/render",
		"gateway:decode:/v1/chat/completions:if-available",
		"gateway:encode:/inference/v1/generate",
		"gateway:prefill:/inference/v1/generate",
		"gateway:decode:/v1/chat/completions",
	}, legSummary(s.Legs()), "decode keeps the client's API (D1)")
}

func TestCascadeRenderRejectionReachesTheClient(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Sim-Fault": {"render=status:422"}, "X-Request-Id": {"rid-422"}})
	body := readAll(t, resp.Body)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	msg, _, code := openAIError(t, body)
	assert.Equal(t, "render rejected the request: sim: injected fault status:422 (request_id: rid-422)", msg,
		"the worker's OpenAI error message inside ours (D20)")
	assert.Equal(t, http.StatusUnprocessableEntity, code)

	resp = st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Sim-Fault": {"prefill=status:500"}})
	body = readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, body)
	assert.Contains(t, body, "prefill failed: HTTP 500")
}
