package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// Issue 34: a body's messages, content blocks and JSON values are counted
// as it is parsed, on both fronts, and a body past a limit is refused
// naming it before any leg. Issue 35: the content parts vLLM reads as
// media are guarded or refused, and a client's uuid never reaches a
// worker.

// structureCase is a body sent over REST and gRPC and the limit or
// refusal it meets ("" for none: it is served).
type structureCase struct {
	name     string
	endpoint coordinatorv1.Endpoint
	path     string
	body     string
	want     string
}

// blocks is n text content blocks.
func blocks(n int) string {
	return strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, n), ",")
}

// sendStructureCase sends c over api ("rest" or "grpc") and returns the
// HTTP status (200 for gRPC OK, 400 for InvalidArgument), the error
// message, and the ErrorInfo's limit on gRPC.
func (s *stack) sendStructureCase(t *testing.T, api string, c structureCase) (code int, msg, limit string) {
	t.Helper()
	if api == "rest" {
		resp := s.post(t, c.path, c.body, nil)
		return resp.StatusCode, readAll(t, resp.Body), ""
	}
	_, err := coordinatorv1.NewCoordinatorServiceClient(s.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: c.endpoint, Json: []byte(c.body)}},
	})
	if err == nil {
		return http.StatusOK, "", ""
	}
	st := status.Convert(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			limit = info.GetMetadata()["limit"]
		}
	}
	return http.StatusBadRequest, st.Message(), limit
}

func TestBodyStructureLimitsOnBothFronts(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	st := startStackEnv(t, map[string]string{
		"COORDINATOR_SERVER_MAX_MESSAGES":       "4",
		"COORDINATOR_SERVER_MAX_CONTENT_BLOCKS": "6",
		"COORDINATOR_SERVER_MAX_JSON_NODES":     "300",
	}, gw.URL, "", decodeOnly)
	chat := coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
	msgs := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 5), ",")
	cases := []structureCase{
		{"within", chat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[` + blocks(3) + `]},{"role":"user","content":[` + blocks(3) + `]}]}`, ""},
		{"chat blocks", chat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[` + blocks(4) + `]},{"role":"user","content":[` + blocks(3) + `]}]}`, "server.max_content_blocks"},
		{"chat messages", chat, "/v1/chat/completions", `{"model":"m","messages":[` + msgs + `]}`, "server.max_messages"},
		{"messages", coordinatorv1.Endpoint_ENDPOINT_MESSAGES, "/v1/messages", `{"model":"m","max_tokens":1,"messages":[` + msgs + `]}`, "server.max_messages"},
		{"responses items", coordinatorv1.Endpoint_ENDPOINT_RESPONSES, "/v1/responses", `{"model":"m","input":[` + msgs + `]}`, "server.max_messages"},
		{"completions token IDs", coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, "/v1/completions", `{"model":"m","prompt":[` + strings.Repeat("1,", 400) + `1]}`, "server.max_json_nodes"},
		{"nested tools", chat, "/v1/chat/completions", `{"model":"m","messages":[],"tools":[` + strings.Repeat("[],", 400) + `[]]}`, "server.max_json_nodes"},
	}
	served := 0
	for _, c := range cases {
		for _, api := range []string{"rest", "grpc"} {
			code, msg, limit := st.sendStructureCase(t, api, c)
			if c.want == "" {
				assert.Equal(t, http.StatusOK, code, "%s %s: %s", api, c.name, msg)
				served++
				continue
			}
			assert.Equal(t, http.StatusBadRequest, code, "%s %s", api, c.name)
			assert.Contains(t, msg, c.want, "%s %s: the error names the limit", api, c.name)
			if api == "grpc" {
				assert.Equal(t, c.want, limit, "%s: the ErrorInfo names the limit", c.name)
			}
		}
	}
	assert.Len(t, gw.Legs(), served, "a body past a limit reaches no worker")
}

func TestClientMediaUUIDsNeverReachAWorker(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	st := startStack(t, gw.URL, "", decodeOnly)
	chat := coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
	parts := `{"type":"text","text":"t","uuid":"client-uuid-1","image_url":"http://169.254.169.254/x"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="},"uuid":"client-uuid-2"}`
	body := `{"model":"m","messages":[{"role":"user","content":[` + parts + `]}]}`
	want := `{"model":"m","messages":[{"role":"user","content":[` +
		`{"type":"text","text":"t","image_url":"http://169.254.169.254/x"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`
	for _, api := range []string{"rest", "grpc"} {
		code, msg, _ := st.sendStructureCase(t, api, structureCase{"uuids", chat, "/v1/chat/completions", body, ""})
		require.Equal(t, http.StatusOK, code, msg)
		legs := gw.Legs()
		require.NotEmpty(t, legs)
		assert.Equal(t, want, string(legs[len(legs)-1].Body), "%s: the worker gets the body less the client's uuids", api)
	}
}

func TestMediaVLLMReadsIsGuardedOrRefused(t *testing.T) {
	t.Parallel()
	gw := recordingGateway(t)
	st := startStack(t, gw.URL, "http://127.0.0.1:1", mediaPipeline)
	chat := coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
	msg := func(parts string) string {
		return `{"model":"m","messages":[{"role":"user","content":[` + parts + `]}]}`
	}
	many := strings.TrimSuffix(strings.Repeat(`{"image_url":"data:image/png;base64,AA=="},`, 65), ",")
	for _, c := range []structureCase{
		{"untyped image_url meets the SSRF guard", chat, "/v1/chat/completions", msg(`{"image_url":"http://169.254.169.254/latest/meta-data"}`), "downloading image 0"},
		{"type null meets the SSRF guard", chat, "/v1/chat/completions", msg(`{"type":null,"image_url":{"url":"http://127.0.0.1:1/a.png"}}`), "downloading image 0"},
		{"chat input_image meets the SSRF guard", chat, "/v1/chat/completions", msg(`{"type":"input_image","image_url":"http://127.0.0.1:1/a.png"}`), "downloading image 0"},
		{"untyped images count against the cap", chat, "/v1/chat/completions", msg(many), "too many multimodal entries: got 65, max 64"},
		{"video_url", chat, "/v1/chat/completions", msg(`{"type":"video_url","video_url":{"url":"http://127.0.0.1:1/v.mp4"}}`), "content part of type video_url is not supported"},
		{"untyped audio_url", chat, "/v1/chat/completions", msg(`{"audio_url":"http://127.0.0.1:1/a.wav"}`), "content part of type audio_url is not supported"},
		{"image_embeds", chat, "/v1/chat/completions", msg(`{"type":"image_embeds","image_embeds":"AA=="}`), "messages[0].content[0]: content part of type image_embeds"},
		{"responses input_audio", coordinatorv1.Endpoint_ENDPOINT_RESPONSES, "/v1/responses",
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, "input[0].content[0]: content part of type input_audio"},
	} {
		for _, api := range []string{"rest", "grpc"} {
			code, got, _ := st.sendStructureCase(t, api, c)
			assert.Equal(t, http.StatusBadRequest, code, "%s %s: %s", api, c.name, got)
			assert.Contains(t, got, c.want, "%s %s", api, c.name)
		}
	}
	assert.Empty(t, gw.Legs(), "no leg ran")
}
