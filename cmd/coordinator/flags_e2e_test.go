package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// The coordinator reads a flag as vLLM's pydantic does (lax bool: "true",
// 1, "yes", "on", any case): what it refuses, and how it frames the
// answer, follow what the worker would do with the same body.

// decodeBody is the body of the one decode leg of the request with client
// id id.
func decodeBody(t *testing.T, s *sim.Sim, id string) map[string]json.RawMessage {
	t.Helper()
	var decodes []sim.Leg
	for _, legs := range requestLegs(s, id) {
		for _, l := range legs {
			if l.Profile == "decode" {
				decodes = append(decodes, l)
			}
		}
	}
	require.Len(t, decodes, 1)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(decodes[0].Body, &body))
	return body
}

func TestStreamSpelledAsVLLMReadsIt(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline)
	chat := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"hi"}],"stream":`
	for _, tc := range []struct{ name, stream string }{{"yes", `"yes"`}, {"one", `1`}, {"string true", `"True"`}} {
		t.Run("REST/"+tc.name, func(t *testing.T) {
			t.Parallel()
			id := "flag-stream-" + strings.ReplaceAll(tc.name, " ", "-")
			resp := st.post(t, "/v1/chat/completions", chat+tc.stream+`}`, http.Header{"X-Request-Id": {id}})
			body := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), "an SSE answer, as vLLM would send")
			assert.Contains(t, body, "data: [DONE]")
			assert.JSONEq(t, `true`, string(decodeBody(t, s, id)["stream"]), "the leg says what the coordinator decided")
		})
	}
	t.Run("gRPC GenerateStream", func(t *testing.T) {
		t.Parallel()
		stream, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
			RequestId: "flag-stream-grpc",
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
				Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(chat + `"on"}`),
			}},
		})
		require.NoError(t, err)
		n := 0
		for {
			_, err := stream.Recv()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			n++
		}
		assert.Positive(t, n)
	})
	t.Run("gRPC Generate", func(t *testing.T) {
		t.Parallel()
		_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
			RequestId: "flag-stream-unary",
			Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
				Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(chat + `"true"}`),
			}},
		})
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.ErrorContains(t, err, `"stream": true needs GenerateStream`)
	})
}

// (With responses.store.backend off, which refuses "store": true; a
// stored "store" is read the same way: TestStoredResponsesFlags.)
func TestResponsesFlagsReadAsVLLMReadsThem(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline+"\nresponses:\n  store:\n    backend: \"off\"\n")
	responses := `{"model":"sim-model","input":"hi","max_output_tokens":3`
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for i, tc := range []struct {
		name, extra string
		want        string // "" when served
	}{
		{name: "store string true", extra: `,"store":"true"`, want: `"store": true is not supported`},
		{name: "store one", extra: `,"store":1`, want: `"store": true is not supported`},
		{name: "store on", extra: `,"store":"ON"`, want: `"store": true is not supported`},
		{name: "background yes", extra: `,"background":"yes"`, want: `"background": true is not supported`},
		{name: "store not a flag", extra: `,"store":"perhaps"`, want: `"store" must be a boolean`},
		{name: "background not a flag", extra: `,"background":2`, want: `"background" must be a boolean`},
	} {
		body := responses + tc.extra + `}`
		t.Run(tc.name+"/REST", func(t *testing.T) {
			t.Parallel()
			resp := st.post(t, "/v1/responses", body, http.Header{"X-Request-Id": {"flag-responses-" + string(rune('a'+i))}})
			got := readAll(t, resp.Body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, got)
			msg, _, _ := openAIError(t, got)
			assert.Contains(t, msg, tc.want)
		})
		t.Run(tc.name+"/gRPC", func(t *testing.T) {
			t.Parallel()
			_, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{
				Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES, Json: []byte(body)},
			}})
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.ErrorContains(t, err, tc.want)
		})
	}
	for _, tc := range []struct{ name, extra string }{{"store missing", ``}, {"store null", `,"store":null`}, {"store no", `,"store":"no"`}} {
		t.Run(tc.name+" goes as false", func(t *testing.T) {
			t.Parallel()
			id := "flag-unstored-" + strings.ReplaceAll(tc.name, " ", "-")
			resp := st.post(t, "/v1/responses", responses+tc.extra+`}`, http.Header{"X-Request-Id": {id}})
			got := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, got)
			assert.JSONEq(t, `false`, string(decodeBody(t, s, id)["store"]), "vLLM would store a response no one can reach")
		})
	}
}
