package sim

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// continuedChat is a chat continuing the first k tokens of the chat output.
func continuedChat(k int, extra string) string {
	return `{"model":"sim-model","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` +
		mustJSONString(ChatText(k)) + `}],"continue_final_message":true,"add_generation_prompt":false` + extra + `}`
}

func mustJSONString(s string) string { return string(appendJSONString(nil, s)) }

func TestChatContinuesItsFinalMessage(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	const k, left = 5, 7
	whole := ChatText(k + left)

	resp := post(t, e.worker.URL+pathChat, legHeader("", "cont-1"), continuedChat(k, `,"max_tokens":7`))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got := jsonOf[chatResponse](t, resp.body)
	require.Len(t, got.Choices, 1)
	assert.Equal(t, whole[len(ChatText(k)):], got.Choices[0].Message.Content, "the output goes on from token k")
	assert.Equal(t, left, got.Usage.CompletionTokens)

	resp = post(t, e.worker.URL+pathChat, legHeader("", "cont-2"), continuedChat(k, `,"max_tokens":7,"stream":true`))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var text strings.Builder
	for _, d := range sseData(t, resp.body) {
		if d == "[DONE]" {
			continue
		}
		ev := jsonOf[struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}](t, []byte(d))
		for _, c := range ev.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	assert.Equal(t, whole[len(ChatText(k)):], text.String(), "streamed too")

	// Not the chat output, or not asked to continue: from the start.
	for name, body := range map[string]string{
		"other text": `{"model":"sim-model","messages":[{"role":"assistant","content":"This answer is"}],"continue_final_message":true,"add_generation_prompt":false,"max_tokens":2}`,
		"not asked":  `{"model":"sim-model","messages":[{"role":"assistant","content":"This answer"}],"max_tokens":2}`,
	} {
		resp := post(t, e.worker.URL+pathChat, legHeader("", "cont-3"), body)
		require.Equal(t, http.StatusOK, resp.status, "%s: %s", name, resp.body)
		assert.Equal(t, ChatText(2), jsonOf[chatResponse](t, resp.body).Choices[0].Message.Content, name)
	}
}

func TestChatContinuationRendersTheFinalMessageOpen(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	resp := post(t, e.render.URL+pathChatRender, legHeader("", "rc-cont"), continuedChat(2, ""))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	want := slices.Concat([]uint32{IMStartTokenID}, refEncode(t, "user\nhi"), []uint32{IMEndTokenID}, refEncode(t, "\n"),
		[]uint32{IMStartTokenID}, refEncode(t, "assistant\n"+ChatText(2)))
	assert.Equal(t, want, jsonOf[renderResp](t, resp.body).TokenIDs)

	both := `{"model":"sim-model","messages":[{"role":"assistant","content":"x"}],"continue_final_message":true,"add_generation_prompt":true}`
	for _, url := range []string{e.render.URL + pathChatRender, e.worker.URL + pathChat} {
		resp := post(t, url, legHeader("", "rc-both"), both)
		assert.Equal(t, http.StatusBadRequest, resp.status, url)
		assert.Equal(t, errBothPrompts, errorOf(t, resp.body).Message, url)
	}
}

func TestChatPrefix(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0, chatPrefix(""))
	assert.Equal(t, 1, chatPrefix("This"))
	assert.Equal(t, 16, chatPrefix(ChatText(16)), "across a repetition of the sentence")
	assert.Equal(t, 0, chatPrefix("This answe"), "not at a token's end")
	assert.Equal(t, 0, chatPrefix("That"))
}
