package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
)

// renderThenDecode checks token arrays in the render step, then decodes.
const renderThenDecode = `
pipeline:
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: decode
`

// hostileCase is one hostile body, sent to its route over REST and as the
// JSON of a gRPC Generate call.
type hostileCase struct {
	name     string
	endpoint coordinatorv1.Endpoint
	body     string
	status   int        // over REST
	code     codes.Code // over gRPC
	want     string     // in the error message, both ways
	// worker marks an answer that is the worker's own, relayed: the
	// coordinator does not interpret the field.
	worker bool
}

var routes = map[coordinatorv1.Endpoint]string{
	coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS: "/v1/chat/completions",
	coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS:      "/v1/completions",
	coordinatorv1.Endpoint_ENDPOINT_GENERATE:         "/inference/v1/generate",
}

func TestHostileBodies(t *testing.T) {
	t.Parallel()
	const (
		chat  = coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
		compl = coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS
		gen   = coordinatorv1.Endpoint_ENDPOINT_GENERATE
	)
	// 2.2 MB: past the body cap (1 MiB here) and past the gRPC message
	// limit, which adds 1 MiB for the envelope.
	tokens := strings.TrimSuffix(strings.Repeat("0,", 1_100_000), ",")
	tests := []hostileCase{
		{name: "100k open brackets", endpoint: chat, body: `{"model":"sim-model","messages":` + strings.Repeat("[", 100_000),
			status: 400, code: codes.InvalidArgument, want: "json nesting exceeds max depth (512)"},
		{name: "100k nested objects", endpoint: gen, body: strings.Repeat(`{"a":`, 100_000),
			status: 400, code: codes.InvalidArgument, want: "json nesting exceeds max depth (512)"},
		{name: "invalid UTF-8 in a message", endpoint: chat, body: "{\"model\":\"sim-model\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}",
			status: 400, code: codes.InvalidArgument, want: "invalid UTF-8 in string literal at offset 62 (in messages[0].content)"},
		{name: "invalid UTF-8 in a key", endpoint: compl, body: "{\"model\":\"sim-model\",\"pr\xc3\":\"x\"}",
			status: 400, code: codes.InvalidArgument, want: "invalid UTF-8 in string literal at offset 24"},
		{name: "duplicate stream", endpoint: chat, body: `{"model":"sim-model","stream":false,"messages":[],"stream":true}`,
			status: 400, code: codes.InvalidArgument, want: `duplicate key "stream"`},
		{name: "duplicate prompt by escape", endpoint: compl, body: `{"model":"sim-model","prompt":"a","pr\u006fmpt":[1]}`,
			status: 400, code: codes.InvalidArgument, want: `duplicate key "prompt"`},
		{name: "duplicate kv_transfer_params", endpoint: compl, body: `{"model":"sim-model","prompt":"a","kv_transfer_params":{},"kv_transfer_params":null}`,
			status: 400, code: codes.InvalidArgument, want: `duplicate key "kv_transfer_params"`},
		{name: "stream not a flag", endpoint: chat, body: `{"model":"sim-model","stream":"sure","messages":[]}`,
			status: 400, code: codes.InvalidArgument, want: `"stream" must be a boolean`},
		{name: "negative prompt token", endpoint: compl, body: `{"model":"sim-model","prompt":[1,-1]}`,
			status: 400, code: codes.InvalidArgument, want: "prompt: invalid token at index 1"},
		{name: "prompt token past 2^32-1", endpoint: compl, body: `{"model":"sim-model","prompt":[4294967296]}`,
			status: 400, code: codes.InvalidArgument, want: "prompt: invalid token at index 0"},
		{name: "fractional prompt token", endpoint: compl, body: `{"model":"sim-model","prompt":[7,8,2.5]}`,
			status: 400, code: codes.InvalidArgument, want: "prompt: invalid token at index 2"},
		{name: "token_ids past 2^32-1", endpoint: gen, body: `{"model":"sim-model","token_ids":[1,4294967296]}`,
			status: 400, code: codes.InvalidArgument, want: "token_ids: index 1: not a non-negative 32-bit integer"},
		{name: "negative token_ids", endpoint: gen, body: `{"model":"sim-model","token_ids":[-3]}`,
			status: 400, code: codes.InvalidArgument, want: "token_ids: index 0: not a non-negative 32-bit integer"},
		{name: "fractional token_ids", endpoint: gen, body: `{"model":"sim-model","token_ids":[1,2,3e-1]}`,
			status: 400, code: codes.InvalidArgument, want: "token_ids: index 2: not a non-negative 32-bit integer"},
		{name: "array past the body cap", endpoint: compl, body: `{"model":"sim-model","prompt":[` + tokens + `]}`,
			status: 413, code: codes.ResourceExhausted, want: "larger than"},
		{name: "max_tokens 1e400 is the worker's to refuse", endpoint: compl, body: `{"model":"sim-model","prompt":[1,2],"max_tokens":1e400}`,
			status: 400, code: codes.InvalidArgument, worker: true},
		{name: "n -1 is the worker's to refuse", endpoint: compl, body: `{"model":"sim-model","prompt":[1,2],"n":-1}`,
			status: 400, code: codes.InvalidArgument, worker: true},
	}
	s, gw, render := startSim(t, sim.Options{})
	st := startStack(t, gw, render, renderThenDecode)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for i, tt := range tests {
		id := fmt.Sprintf("hostile-%d", i)
		t.Run(tt.name+"/REST", func(t *testing.T) {
			t.Parallel()
			resp := st.post(t, routes[tt.endpoint], tt.body, http.Header{"X-Request-Id": {id + "-rest"}})
			body := readAll(t, resp.Body)
			assert.Equal(t, tt.status, resp.StatusCode, body)
			msg := openAIErrorMessage(t, resp, body)
			want := tt.want
			if tt.status == http.StatusRequestEntityTooLarge {
				want = "request body too large"
			}
			assert.Contains(t, msg, want)
			assert.Equal(t, !tt.worker, strings.Contains(msg, "request_id"), "the coordinator's answer names the request; the worker's is its own: %s", msg)
		})
		t.Run(tt.name+"/gRPC", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{RequestId: id + "-grpc", Input: &coordinatorv1.GenerateRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: tt.endpoint, Json: []byte(tt.body)},
			}})
			st := status.Convert(err)
			require.Equal(t, tt.code, st.Code(), st.Message())
			assert.Contains(t, st.Message(), tt.want)
			if tt.worker {
				u := apierror.UpstreamDetail(st)
				require.NotNil(t, u, "the worker's answer travels with the status")
				assert.EqualValues(t, tt.status, u.GetStatusCode())
			}
		})
	}
	t.Cleanup(func() {
		for _, leg := range s.Legs() {
			id := leg.Header.Get("X-Request-Id")
			for i, tt := range tests {
				if !tt.worker && strings.HasPrefix(id, fmt.Sprintf("hostile-%d-", i)) {
					t.Errorf("refused request %s (%s) reached the %s leg", id, tt.name, leg.Service)
				}
			}
		}
	})
}

// openAIErrorMessage checks that body is an OpenAI error object and returns
// its message.
func openAIErrorMessage(t *testing.T, resp *http.Response, body string) string {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var e struct {
		Error struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotNil(t, e.Error.Message, body)
	return *e.Error.Message
}

func TestHostileArrayUnderTheCapIsAnswered(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{})
	st := startStack(t, gw, render, renderThenDecode)
	tokens := strings.TrimSuffix(strings.Repeat("7,", 400_000), ",") // 800 kB
	body := `{"model":"sim-model","prompt":[` + tokens + `],"max_tokens":1}`
	require.Less(t, len(body), 1<<20)
	resp := st.post(t, "/v1/completions", body, nil)
	answer := readAll(t, resp.Body)
	t.Logf("%d: %.200s", resp.StatusCode, answer)
	if resp.StatusCode != http.StatusOK {
		msg := openAIErrorMessage(t, resp, answer)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, msg)
		assert.NotContains(t, msg, "request_id", "a refusal of a long prompt is the worker's")
	}
}

func TestHostileHeaders(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_MAX_HEADER_BYTES": "8192"}, gw, "", decodeOnly)
	big := strings.Repeat("x", 64<<10)

	t.Run("REST", func(t *testing.T) {
		t.Parallel()
		resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Big": {big}, "X-Request-Id": {"big-header-rest"}})
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	})
	t.Run("gRPC", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-big", big)
		_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(ctx, chatRequest("big-header-grpc", chatBody))
		st := status.Convert(err)
		require.Error(t, err)
		assert.Contains(t, st.Message(), "header list size")
	})
	t.Run("under the limit", func(t *testing.T) {
		t.Parallel()
		resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Small": {strings.Repeat("y", 1024)}})
		assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	})
	t.Cleanup(func() {
		for _, leg := range s.Legs() {
			assert.Empty(t, leg.Header.Get("X-Big"), "an oversized header never reaches a leg")
		}
	})
}
