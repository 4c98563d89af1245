package sim

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutputSuffix(t *testing.T) {
	t.Parallel()
	out := func(k int) []uint32 {
		ids := make([]uint32, k)
		for i := range ids {
			ids[i] = wordAt(i).id
		}
		return ids
	}
	for name, tc := range map[string]struct {
		prompt []uint32
		want   int
	}{
		"no output":             {[]uint32{9000, 9001}, 0},
		"three tokens":          {append([]uint32{9000}, out(3)...), 3},
		"past one sentence":     {append([]uint32{9000}, out(30)...), 30},
		"not the output":        {[]uint32{9000, wordAt(1).id}, 0},
		"the prompt all output": {out(2), 0},
		"output after output":   {append(out(1), out(2)...), 2},
	} {
		assert.Equal(t, tc.want, outputSuffix(tc.prompt), name)
	}
}

// completionIDs is what the test reads of a completions answer or event.
type completionIDs struct {
	Choices []struct {
		Text           string   `json:"text"`
		TokenIDs       []uint32 `json:"token_ids"`
		PromptTokenIDs []uint32 `json:"prompt_token_ids"`
	} `json:"choices"`
}

func TestCompletionNamesItsTokensAndContinuesThem(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	const k, left = 5, 7
	whole := ChatText(k + left)
	prompt := []uint32{9000, 9001}
	for i := range k {
		prompt = append(prompt, wordAt(i).id)
	}
	body := `{"model":"sim-model","prompt":` + string(appendIDs(nil, prompt)) + `,"max_tokens":7,"return_token_ids":true`

	resp := post(t, e.worker.URL+pathCompletions, legHeader("", "ccont-1"), body+`}`)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got := jsonOf[completionIDs](t, resp.body)
	require.Len(t, got.Choices, 1)
	assert.Equal(t, whole[len(ChatText(k)):], got.Choices[0].Text, "the output goes on from token k")
	want := make([]uint32, 0, left)
	for i := range left {
		want = append(want, wordAt(k+i).id)
	}
	assert.Equal(t, want, got.Choices[0].TokenIDs)
	assert.Equal(t, prompt, got.Choices[0].PromptTokenIDs)

	resp = post(t, e.worker.URL+pathCompletions, legHeader("", "ccont-2"), body+`,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var text strings.Builder
	var ids []uint32
	var prompts [][]uint32
	for _, d := range sseData(t, resp.body) {
		if d == "[DONE]" {
			continue
		}
		for _, c := range jsonOf[completionIDs](t, []byte(d)).Choices {
			text.WriteString(c.Text)
			ids = append(ids, c.TokenIDs...)
			if c.PromptTokenIDs != nil {
				prompts = append(prompts, c.PromptTokenIDs)
			}
		}
	}
	assert.Equal(t, whole[len(ChatText(k)):], text.String(), "streamed too")
	assert.Equal(t, want, ids, "a token's ids in its chunk")
	assert.Equal(t, [][]uint32{prompt}, prompts, "the prompt's in the first")

	resp = post(t, e.worker.URL+pathCompletions, legHeader("", "ccont-3"), `{"model":"sim-model","prompt":[9000],"max_tokens":2}`)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	assert.NotContains(t, string(resp.body), "token_ids", "not asked: not named")
}
