package sim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Messages or Responses conversation counts as many input tokens as the
// render service's chat render of the chat vLLM makes of it; what the
// simulator does not convert (a tool call) is counted by its text.
func TestAPIPromptCountsTheTemplate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, OutputTokens: 2})
	const image = "data:image/png;base64,iVBORw0KGgo="
	chat := `{"model":"sim-model","messages":[{"role":"system","content":"Be brief."},` +
		`{"role":"user","content":[{"type":"text","text":"Look at"},{"type":"image_url","image_url":{"url":"` + image + `"}}]},` +
		`{"role":"assistant","content":"A cat."},{"role":"user","content":"Sure?"}]}`
	resp := post(t, e.render.URL+pathChatRender, http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"rr-1"}}, chat)
	require.Equal(t, http.StatusOK, resp.status, resp.body)
	want := len(jsonOf[renderOutput](t, resp.body).TokenIDs)

	messages := `{"model":"sim-model","max_tokens":2,"system":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}],"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"Look at"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},` +
		`{"role":"assistant","content":"A cat."},{"role":"user","content":"Sure?"}]}`
	resp = post(t, e.gateway.URL+pathMessages, legHeader("decode", "m-1"), messages)
	require.Equal(t, http.StatusOK, resp.status, resp.body)
	assert.Equal(t, want, jsonOf[messagesResponse](t, resp.body).Usage.InputTokens)

	responses := `{"model":"sim-model","instructions":"Be brief.","input":[` +
		`{"role":"user","content":[{"type":"input_text","text":"Look at"},{"type":"input_image","image_url":"` + image + `"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat."}]},{"role":"user","content":"Sure?"}]}`
	resp = post(t, e.gateway.URL+pathResponses, legHeader("decode", "r-1"), responses)
	require.Equal(t, http.StatusOK, resp.status, resp.body)
	assert.Equal(t, want, jsonOf[responsesResponse](t, resp.body).Usage.InputTokens)

	tools := `{"model":"sim-model","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`
	resp = post(t, e.gateway.URL+pathResponses, legHeader("decode", "r-2"), tools)
	require.Equal(t, http.StatusOK, resp.status, resp.body)
	assert.Equal(t, (len(`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`)+3)/4, jsonOf[responsesResponse](t, resp.body).Usage.InputTokens)
}
