package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// The OpenAI Responses (POST /v1/responses) and Anthropic Messages (POST
// /v1/messages) APIs through the whole pipeline on every front door: REST,
// streamed and not, and gRPC Generate and GenerateStream.

// apisPipeline is render, prefill and decode with kv-nixl (pdDisaggregated):
// a Messages request is disaggregated in its own shape, a Responses one
// decoded where it is served (vLLM's ResponsesRequest takes no
// kv_transfer_params).
var apisPipeline = fmt.Sprintf(pdDisaggregated, true)

// apiCase is one API's request and what its answer holds.
type apiCase struct {
	name, path string
	endpoint   coordinatorv1.Endpoint
	body       string // without "stream"
	// first and last are a stream's first and last event types.
	first, last string
	// prefill: a prefill leg runs for the API.
	prefill bool
	// text is where a whole answer's text is.
	text func(t *testing.T, body []byte) string
}

var apiCases = []apiCase{
	{
		name: "responses", path: "/v1/responses", endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES,
		body:  `{"model":"sim-model","input":[{"role":"user","content":[{"type":"input_text","text":"Hello there"}]}],"max_output_tokens":4}`,
		first: "response.created", last: "response.completed",
		text: func(t *testing.T, body []byte) string {
			var r struct {
				Object string `json:"object"`
				Output []struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"output"`
				Usage struct {
					InputTokens        int `json:"input_tokens"`
					InputTokensDetails *struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
			}
			require.NoError(t, json.Unmarshal(body, &r), string(body))
			assert.Equal(t, "response", r.Object)
			assert.Positive(t, r.Usage.InputTokens)
			require.NotNil(t, r.Usage.InputTokensDetails, "usage in the Responses shape")
			require.Len(t, r.Output, 1)
			require.Len(t, r.Output[0].Content, 1)
			return r.Output[0].Content[0].Text
		},
	},
	{
		name: "messages", path: "/v1/messages", endpoint: coordinatorv1.Endpoint_ENDPOINT_MESSAGES,
		body:  `{"model":"sim-model","max_tokens":4,"system":"Be brief.","messages":[{"role":"user","content":"Hello there"}]}`,
		first: "message_start", last: "message_stop", prefill: true,
		text: func(t *testing.T, body []byte) string {
			var m struct {
				Type    string                  `json:"type"`
				Content []struct{ Text string } `json:"content"`
				Usage   struct {
					InputTokens          int  `json:"input_tokens"`
					OutputTokens         int  `json:"output_tokens"`
					CacheReadInputTokens *int `json:"cache_read_input_tokens"`
				} `json:"usage"`
			}
			require.NoError(t, json.Unmarshal(body, &m), string(body))
			assert.Equal(t, "message", m.Type)
			assert.Equal(t, 4, m.Usage.OutputTokens)
			require.NotNil(t, m.Usage.CacheReadInputTokens, "usage in the Messages shape")
			assert.Zero(t, *m.Usage.CacheReadInputTokens, "a cold prompt: the prefill's count, not the decode's remote-KV count (D21)")
			require.Len(t, m.Content, 1)
			return m.Content[0].Text
		},
	},
}

// withStream is body with "stream": true.
func withStream(body string) string { return strings.TrimSuffix(body, "}") + `,"stream":true}` }

// namedEvent matches one server-sent event with its type: exactly the
// framing the workers write and the coordinator relays.
var namedEvent = regexp.MustCompile(`^event: ([a-z_.]+)\ndata: (\{.*\})$`)

// splitEvents splits a stream's bytes into its events' types and data;
// every event must be typed.
func splitEvents(t *testing.T, raw string) (names, data []string) {
	t.Helper()
	require.True(t, strings.HasSuffix(raw, "\n\n"), "the stream ends with a whole event: %q", raw)
	for _, ev := range strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n") {
		m := namedEvent.FindStringSubmatch(ev)
		require.NotNil(t, m, "a typed event: %q", ev)
		names, data = append(names, m[1]), append(data, m[2])
	}
	return names, data
}

func TestAPIsOverREST(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, PromptTokensDetails: true, OutputTokens: 8})
	st := startStack(t, gw, render, apisPipeline)
	for _, c := range apiCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := "apis-rest-" + c.name
			resp := st.post(t, c.path, c.body, http.Header{"X-Request-Id": {id}})
			body := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, "This answer was streamed", c.text(t, []byte(body)))
			assert.Equal(t, c.prefill, len(pdLegs(s, id, "prefill")) == 1, "prefill legs: %v", pdLegs(s, id, "prefill"))

			sid := id + "-stream"
			resp = st.post(t, c.path, withStream(c.body), http.Header{"X-Request-Id": {sid}})
			raw := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, raw)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			names, data := splitEvents(t, raw)
			assert.Equal(t, c.first, names[0])
			assert.Equal(t, c.last, names[len(names)-1])
			assert.NotContains(t, raw, "[DONE]", "these APIs end with their last typed event")
			for i, d := range data {
				var ev struct{ Type string }
				require.NoError(t, json.Unmarshal([]byte(d), &ev), d)
				assert.Equal(t, names[i], ev.Type, "the event's type names its data's")
			}
			assert.Equal(t, c.prefill, len(pdLegs(s, sid, "prefill")) == 1)
			assert.Contains(t, resp.Header.Get("Server-Timing"), "prefill;dur=", "the steps before the stream, timed")

			// Metrics label the API: both requests counted under its endpoint.
			series := `coordinator_requests_total{api="rest",endpoint="` + c.name + `",status="200"} 2`
			require.Eventually(t, func() bool {
				resp, err := st.client.Get(st.restURL + "/metrics")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return strings.Contains(string(b), series)
			}, 5*time.Second, 20*time.Millisecond, series)
		})
	}
}

func TestAPIsOverGRPC(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true, PromptTokensDetails: true, OutputTokens: 8})
	st := startStack(t, gw, render, apisPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for _, c := range apiCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(c.body)}}})
			require.NoError(t, err)
			assert.Equal(t, "This answer was streamed", c.text(t, resp.GetOpenai().GetJson()))

			stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(withStream(c.body))}}})
			require.NoError(t, err)
			var names []string
			for {
				msg, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				ev := msg.GetOpenai()
				require.Len(t, ev.GetEvent(), len(ev.GetData()), "every event's type travels with it")
				names = append(names, ev.GetEvent()...)
			}
			require.NotEmpty(t, names)
			assert.Equal(t, c.first, names[0])
			assert.Equal(t, c.last, names[len(names)-1])

			_, err = client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(`{"model":"sim-model","input":7,"messages":7}`)}}})
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		})
	}
}

// Each API answers a bad request in its own error JSON, at once, and a
// stream cut off after its first event with its own final error event.
func TestAPIsErrorsInTheirOwnShape(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 8})
	st := startStack(t, gw, render, apisPipeline)

	resp := st.post(t, "/v1/messages", `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, nil)
	body := readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Regexp(t, `^\{"type":"error","error":\{"type":"invalid_request_error","message":"invalid request: messages\[0\]\.content\[0\]\.type: unknown content block type \\"video\\" \(request_id: [0-9a-f-]+\)"\}\}$`, body)

	resp = st.post(t, "/v1/messages", `{"model":"sim-model","max_tokens":4,"messages":`, nil)
	body = readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, `{"type":"error","error":{"type":"invalid_request_error","message":"invalid JSON body: `)

	resp = st.post(t, "/v1/responses", `{"model":"sim-model","input":"hi","background":true}`, nil)
	body = readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	msg, typ, code := openAIError(t, body)
	assert.Contains(t, msg, `"background": true is not supported: the coordinator is stateless`)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Equal(t, 400, code)

	resp = st.post(t, "/v1/messages", `{"model":"no-such-model","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, nil)
	body = readAll(t, resp.Body)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the worker's 4xx with its message")
	assert.True(t, strings.HasPrefix(body, `{"type":"error","error":{"type":"not_found_error","message":"`), body)

	for _, c := range []struct{ path, body, event string }{
		{"/v1/messages", `{"model":"sim-model","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			`event: error` + "\n" + `data: {"type":"error","error":{"type":"api_error","message":"decode answer cut off (request_id: cut-messages)"}}` + "\n\n"},
		{"/v1/responses", `{"model":"sim-model","input":"hi","stream":true}`,
			`event: error` + "\n" + `data: {"type":"error","code":"api_error","message":"decode answer cut off (request_id: cut-responses)","param":null}` + "\n\n"},
	} {
		id := "cut-" + strings.TrimPrefix(c.path, "/v1/")
		resp := st.post(t, c.path, c.body, http.Header{"X-Request-Id": {id}, sim.FaultHeader: {"decode=reset-mid-stream"}})
		raw := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, raw)
		assert.True(t, strings.HasSuffix(raw, c.event), "%s ends with its own error event: %q", c.path, raw)
		assert.Contains(t, raw, "delta\ndata:", "the events before the cut reached the client")
	}
}

// Hostile Responses and Messages bodies get the API's own 4xx at once,
// over REST and gRPC alike: never a 5xx, a panic or a hang, and no leg.
func TestAPIsHostileBodies(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	many := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	for i, tc := range []struct {
		name   string
		c      apiCase
		body   string
		status int
		want   string
	}{
		{"deep nesting", apiCases[1], `{"model":"sim-model","max_tokens":4,"messages":` + strings.Repeat("[", 100_000), 400, "json nesting exceeds max depth"},
		{"invalid UTF-8", apiCases[0], "{\"model\":\"sim-model\",\"input\":\"caf\xe9\"}", 400, "invalid UTF-8 in string literal"},
		{"duplicate key", apiCases[1], `{"model":"sim-model","max_tokens":4,"max_tokens":9,"messages":[]}`, 400, `duplicate key "max_tokens"`},
		{"stream not a flag", apiCases[0], `{"model":"sim-model","input":"x","stream":"sure"}`, 400, `"stream" must be a boolean`},
		{"max_tokens as a string", apiCases[1], `{"model":"sim-model","max_tokens":"4","messages":[]}`, 400, "max_tokens must be an integer"},
		{"input as a number", apiCases[0], `{"model":"sim-model","input":42}`, 400, "input must be an array"},
		{"unknown content type", apiCases[0], `{"model":"sim-model","input":[{"role":"user","content":[{"type":"input_video"}]}]}`, 400, `unknown content type "input_video"`},
		{"image source not an object", apiCases[1], `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":"x"}]}]}`, 400, "source must be an object"},
		{"huge input", apiCases[0], `{"model":"sim-model","input":` + many(5000, `{"role":"user","content":"x"}`) + `}`, 400, "input has more than 4096 items"},
		{"huge content", apiCases[1], `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":` + many(5000, `{"type":"text","text":"x"}`) + `}]}`, 400, "content has more than 4096 items"},
		{"past the body cap", apiCases[1], `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1_100_000) + `"}]}`, 413, "request body too large"},
		{"previous_response_id not stored", apiCases[0], `{"model":"sim-model","input":"x","previous_response_id":"resp_1"}`, 404, "Previous response with id 'resp_1' not found."},
		{"previous_response_id not a string", apiCases[0], `{"model":"sim-model","input":"x","previous_response_id":{}}`, 400, `"previous_response_id" must be a non-empty string`},
	} {
		id := fmt.Sprintf("apis-hostile-%d", i)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := st.post(t, tc.c.path, tc.body, http.Header{"X-Request-Id": {id}})
			body := readAll(t, resp.Body)
			assert.Equal(t, tc.status, resp.StatusCode, body)
			if tc.c.endpoint == coordinatorv1.Endpoint_ENDPOINT_MESSAGES {
				var e struct {
					Type  string `json:"type"`
					Error struct{ Type, Message string }
				}
				require.NoError(t, json.Unmarshal([]byte(body), &e), body)
				assert.Equal(t, "error", e.Type)
				assert.Contains(t, e.Error.Message, tc.want)
			} else {
				msg, _, _ := openAIError(t, body)
				assert.Contains(t, msg, tc.want)
			}
			for _, profile := range []string{"prefill", "decode"} {
				assert.Empty(t, pdLegs(s, id, profile), "refused before any leg")
			}
			if tc.status == http.StatusRequestEntityTooLarge {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: tc.c.endpoint, Json: []byte(tc.body)}}})
			want := codes.InvalidArgument
			if tc.status == http.StatusNotFound {
				want = codes.NotFound
			}
			assert.Equal(t, want, status.Code(err), "%v", err)
		})
	}
}
