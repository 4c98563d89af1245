package sim

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The OpenAI Responses and Anthropic Messages endpoints, as vLLM serves
// them: whole answers, typed event streams, usage shapes, errors.

func TestResponsesAnswer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, OutputTokens: 3, PromptTokensDetails: true})
	resp := post(t, e.gateway.URL+pathResponses, legHeader("decode", "resp-1"), `{"model":"sim-model","input":"hello there","max_output_tokens":2}`)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	r := jsonOf[responsesResponse](t, resp.body)
	assert.Equal(t, "resp_resp-1", r.ID)
	assert.Equal(t, "incomplete", r.Status, "max_output_tokens ended it")
	require.NotNil(t, r.IncompleteDetails)
	assert.Equal(t, "max_output_tokens", r.IncompleteDetails.Reason)
	require.Len(t, r.Output, 1)
	assert.Equal(t, "This answer", r.Output[0].Content[0].Text)
	require.NotNil(t, r.Usage)
	assert.Equal(t, 2, r.Usage.OutputTokens)
	assert.Equal(t, r.Usage.InputTokens+2, r.Usage.TotalTokens)
}

func TestMessagesAnswerAndPrefill(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, OutputTokens: 3, PromptTokensDetails: true})
	body := `{"model":"sim-model","max_tokens":1,"stream":false,"messages":[{"role":"user","content":"hello there"}],` +
		`"kv_transfer_params":{"do_remote_decode":true}}`
	resp := post(t, e.gateway.URL+pathMessages, legHeader("prefill", "msg-1"), body)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	m := jsonOf[messagesResponse](t, resp.body)
	assert.Equal(t, "msg_msg-1", m.ID)
	assert.NotEmpty(t, m.KVTransferParams, "the prefill's kv_transfer_params, for the decode leg")
	require.NotNil(t, m.StopReason)
	assert.Equal(t, "max_tokens", *m.StopReason)
	require.NotNil(t, m.Usage.CacheReadInputTokens)

	decode := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"hello there"}],"kv_transfer_params":` + string(m.KVTransferParams) + `}`
	resp = post(t, e.gateway.URL+pathMessages, legHeader("decode", "msg-1"), decode)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	d := jsonOf[messagesResponse](t, resp.body)
	assert.Equal(t, "This answer was", d.Content[0].Text)
	require.NotNil(t, d.Usage.CacheReadInputTokens)
	assert.Equal(t, d.Usage.InputTokens, *d.Usage.CacheReadInputTokens, "a remote prefill: every prompt token's KV came from the prefill, as vLLM counts it")
}

// typedEvent is one event of a named stream.
var typedEvent = regexp.MustCompile(`^event: ([a-z_.]+)\ndata: \{"type":"([a-z_.]+)"`)

func TestNamedStreams(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{OutputTokens: 2})
	for _, tc := range []struct {
		path, body string
		want       []string
	}{
		{pathResponses, `{"model":"sim-model","input":"hi","stream":true}`, []string{"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}},
		{pathMessages, `{"model":"sim-model","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, []string{"message_start",
			"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}},
	} {
		resp := post(t, e.gateway.URL+tc.path, legHeader("decode", "s-1"), tc.body)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		assert.Equal(t, "text/event-stream", resp.header.Get("Content-Type"))
		var names []string
		for _, ev := range strings.Split(strings.TrimSuffix(string(resp.body), "\n\n"), "\n\n") {
			m := typedEvent.FindStringSubmatch(ev)
			require.NotNil(t, m, "a typed event: %q", ev)
			assert.Equal(t, m[1], m[2], "the event's type names its data's")
			names = append(names, m[1])
		}
		assert.Equal(t, tc.want, names, tc.path)
	}
}

func TestAPIsErrorsAndStrictRules(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	resp := post(t, e.gateway.URL+pathMessages, legHeader("decode", "e-1"), `{"model":"sim-model","messages":[]}`)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.Equal(t, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}`, string(resp.body),
		"Anthropic's error shape on /v1/messages")
	resp = post(t, e.gateway.URL+pathMessages, legHeader("decode", "e-2"), `{"model":"nope","max_tokens":1,"messages":[]}`)
	require.Equal(t, http.StatusNotFound, resp.status)
	assert.Contains(t, string(resp.body), `{"type":"error","error":{"type":"not_found_error","message":"The model`)

	resp = post(t, e.gateway.URL+pathResponses, legHeader("decode", "e-3"), `{"model":"sim-model","input":"x","kv_transfer_params":{"do_remote_prefill":true}}`)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.Equal(t, "sim: "+ruleResponsesKV, errorOf(t, resp.body).Message)
	resp = post(t, e.gateway.URL+pathMessages, legHeader("decode", "e-4"), `{"model":"sim-model","max_tokens":1,"messages":[],"ec_transfer_params":{}}`)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.Contains(t, string(resp.body), ruleMessagesEC)
	resp = post(t, e.gateway.URL+pathResponses, legHeader("decode", "e-5"), `{"model":"sim-model"}`)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.Equal(t, "input: field required", errorOf(t, resp.body).Message)
}
