package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// The token counts (POST /v1/messages/count_tokens, POST
// /v1/responses/input_tokens and gRPC CountTokens) against the simulator's
// render service: the count is the number of token IDs render answers for
// the conversation, which is the input_tokens of the answer to the same
// conversation through the same pipeline.

// countCase is one API's count route, a body to count, the same
// conversation as the chat body render takes, and the inference route
// and body its answer's usage is compared with.
type countCase struct {
	name, path, inferPath string
	endpoint              coordinatorv1.Endpoint
	body, chat            string
	// bound is the output bound the inference body adds.
	bound string
	// wantObject is the count answer's "object".
	wantObject string
	// label is the count's endpoint label in the metrics.
	label string
}

const countImage = "data:image/png;base64,iVBORw0KGgo="

// countChat is both cases' conversation as the chat body vLLM renders.
const countChat = `{"model":"sim-model","messages":[{"role":"system","content":"Be brief."},` +
	`{"role":"user","content":[{"type":"text","text":"What is on this picture?"},{"type":"image_url","image_url":{"url":"` + countImage + `"}}]},` +
	`{"role":"assistant","content":"A cat on a mat."},{"role":"user","content":"Are you sure?"}]}`

var countCases = []countCase{
	{
		name: "messages", path: "/v1/messages/count_tokens", inferPath: "/v1/messages", endpoint: coordinatorv1.Endpoint_ENDPOINT_MESSAGES,
		body: `{"model":"sim-model","system":[{"type":"text","text":"Be brief."}],"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"What is on this picture?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},` +
			`{"role":"assistant","content":"A cat on a mat."},{"role":"user","content":"Are you sure?"}]}`,
		chat: countChat, bound: `,"max_tokens":4`, label: "messages_count_tokens",
	},
	{
		name: "responses", path: "/v1/responses/input_tokens", inferPath: "/v1/responses", endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES,
		body: `{"model":"sim-model","instructions":"Be brief.","input":[` +
			`{"role":"user","content":[{"type":"input_text","text":"What is on this picture?"},{"type":"input_image","image_url":"` + countImage + `"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat on a mat."}]},{"role":"user","content":"Are you sure?"}]}`,
		chat: countChat, bound: `,"max_output_tokens":4`, wantObject: "response.input_tokens", label: "responses_input_tokens",
	},
}

// countAnswer is either API's count answer.
type countAnswer struct {
	Object      string `json:"object"`
	InputTokens int    `json:"input_tokens"`
}

// renderCount is the number of token IDs the render service answers for a
// chat body, asked directly.
func renderCount(t *testing.T, renderURL, chat string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, renderURL+"/v1/chat/completions/render", strings.NewReader(chat))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "direct-render")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var answer struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NotEmpty(t, answer.TokenIDs)
	return len(answer.TokenIDs)
}

// countLegs are the simulator's legs of a request id, by service or profile.
func countLegs(s *sim.Sim, id string) (render, workers int) {
	for _, l := range s.Legs() {
		if !headers.IsLegRequestID(l.Header.Get("X-Request-Id"), id) {
			continue
		}
		if l.Service == sim.ServiceRender {
			render++
		} else {
			workers++
		}
	}
	return render, workers
}

func TestCountTokensEqualsRenderAndUsage(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, PromptTokensDetails: true, OutputTokens: 4})
	st := startStack(t, gw, render, apisPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	t.Cleanup(func() { // the counts' render legs are observed as any leg (no inference request renders here)
		const series = `coordinator_leg_duration_seconds_count{phase="render",status="200"} 4`
		assert.True(t, strings.Contains(metricsText(t, st), series), series)
	})
	for _, c := range countCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := renderCount(t, render, c.chat)

			id := "count-" + c.name
			resp := st.post(t, c.path, withStream(c.body), http.Header{"X-Request-Id": {id}})
			body := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, id, resp.Header.Get("X-Request-Id"))
			var got countAnswer
			require.NoError(t, json.Unmarshal([]byte(body), &got), body)
			assert.Equal(t, want, got.InputTokens, "the render service's count of the same conversation")
			assert.Equal(t, c.wantObject, got.Object)
			renderLegs, workerLegs := countLegs(s, id)
			assert.Equal(t, 1, renderLegs, "one render call")
			assert.Zero(t, workerLegs, "no worker leg")
			series := `coordinator_requests_total{api="rest",endpoint="` + c.label + `",status="200"} 1`
			require.Eventually(t, func() bool { return strings.Contains(metricsText(t, st), series) }, 5*time.Second, 20*time.Millisecond, series)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g, err := client.CountTokens(ctx, &coordinatorv1.CountTokensRequest{Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(c.body)}})
			require.NoError(t, err)
			assert.EqualValues(t, want, g.GetInputTokens())
			assert.JSONEq(t, body, string(g.GetOpenai().GetJson()), "gRPC carries the REST answer's bytes")

			resp = st.post(t, c.inferPath, strings.TrimSuffix(c.body, "}")+c.bound+`}`, nil)
			answer := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, answer)
			var usage struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			}
			require.NoError(t, json.Unmarshal([]byte(answer), &usage), answer)
			assert.Equal(t, want, usage.Usage.InputTokens, "the workers' count of the same conversation")
		})
	}
}

// Bad bodies are 400 in each API's dialect, before any render call; the
// render service's failure is 502; a pipeline without a render step
// answers 501 naming it.
func TestCountTokensErrors(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline)
	noRender := startStack(t, gw, render, decodeOnly)
	for _, tc := range []struct {
		name, path, body string
		st               *stack
		header           http.Header
		code             int
		// anthropic: the error is Anthropic's; else OpenAI's.
		anthropic bool
		errType   string
		msg       string
	}{
		{"messages no messages", "/v1/messages/count_tokens", `{"model":"sim-model"}`, st, nil, 400, true, "invalid_request_error", "messages is required"},
		{"messages bad block", "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, st, nil, 400, true, "invalid_request_error", `unknown content block type "video"`},
		{"messages not json", "/v1/messages/count_tokens", `{"messages":`, st, nil, 400, true, "invalid_request_error", "invalid JSON body"},
		{"responses bad input", "/v1/responses/input_tokens", `{"model":"sim-model","input":7}`, st, nil, 400, false, "invalid_request_error", "input"},
		{"responses stateful", "/v1/responses/input_tokens", `{"input":"a","previous_response_id":"resp_1"}`, st, nil, 400, false, "invalid_request_error", "previous_response_id"},
		{"responses encrypted reasoning", "/v1/responses/input_tokens", `{"input":[{"type":"reasoning","encrypted_content":"x","summary":[]}]}`, st, nil, 400, false, "invalid_request_error", "encrypted reasoning"},
		{"render down", "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"hi"}]}`, st,
			http.Header{sim.FaultHeader: {"render=status:500"}}, 502, true, "api_error", "render"},
		{"no render step messages", "/v1/messages/count_tokens", `{"messages":[]}`, noRender, nil, 501, true, "api_error", "token counting needs a render step in pipeline.steps"},
		{"no render step responses", "/v1/responses/input_tokens", `{"input":"a"}`, noRender, nil, 501, false, "api_error", "token counting needs a render step in pipeline.steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "count-err-" + strings.ReplaceAll(tc.name, " ", "-")
			header := http.Header{"X-Request-Id": {id}}
			for k, v := range tc.header {
				header[k] = v
			}
			resp := tc.st.post(t, tc.path, tc.body, header)
			body := readAll(t, resp.Body)
			assert.Equal(t, tc.code, resp.StatusCode, body)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			if tc.anthropic {
				assert.Equal(t, "error", e.Type, body)
			} else {
				assert.Empty(t, e.Type, body)
			}
			assert.Equal(t, tc.errType, e.Error.Type, body)
			assert.Contains(t, e.Error.Message, tc.msg)
			assert.Contains(t, e.Error.Message, id)
			if tc.code == 400 {
				renderLegs, workerLegs := countLegs(s, id)
				assert.Zero(t, renderLegs+workerLegs, "refused before any leg")
			}
		})
	}
	_, err := coordinatorv1.NewCoordinatorServiceClient(noRender.conn).CountTokens(context.Background(),
		&coordinatorv1.CountTokensRequest{Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_MESSAGES, Json: []byte(`{"messages":[]}`)}})
	assert.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
	_, err = coordinatorv1.NewCoordinatorServiceClient(st.conn).CountTokens(context.Background(),
		&coordinatorv1.CountTokensRequest{Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_MESSAGES}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "protovalidate: the body is required: %v", err)
}

// metricsText is the stack's /metrics page ("" when it cannot be read).
func metricsText(t *testing.T, st *stack) string {
	t.Helper()
	resp, err := st.client.Get(st.restURL + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	return readAll(t, resp.Body)
}
