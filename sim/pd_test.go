package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vLLM's P/D behaviour: prefix caches, prompt_tokens_details, the decode
// worker after a remote prefill, prompt logprobs and completions echo.

// idsJSON is n token IDs from start, as JSON.
func idsJSON(start, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(start + i)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// usageOf reads an answer's usage.
type usageView struct {
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func cachedOf(t *testing.T, body []byte) (int, bool) {
	t.Helper()
	u := jsonOf[usageView](t, body).Usage
	if u.PromptTokensDetails == nil {
		return 0, false
	}
	return u.PromptTokensDetails.CachedTokens, true
}

const nixlPrefillKV = `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null}`

func TestPrefixCacheHitsWholeBlocksOnRepeat(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, PromptTokensDetails: true})
	chat := func(id, prompt, salt string) int {
		body := `{"model":"sim-model","messages":[],"tokens":{"token_ids":` + prompt + `},"max_tokens":1,"stream":false,` +
			`"kv_transfer_params":` + nixlPrefillKV + salt + `}`
		resp := post(t, e.gateway.URL+pathChat, legHeader("prefill", id), body)
		require.Equal(t, http.StatusOK, resp.status, string(resp.body))
		n, ok := cachedOf(t, resp.body)
		require.True(t, ok, "chat reports a zero count too")
		return n
	}
	assert.Equal(t, 0, chat("c1", idsJSON(1, 40), ""), "cold")
	assert.Equal(t, 32, chat("c2", idsJSON(1, 40), ""), "whole blocks of a repeated prompt")
	assert.Equal(t, 32, chat("c3", idsJSON(1, 48), ""), "at most (n-1)/16 blocks: the last token is computed")
	assert.Equal(t, 16, chat("c4", strings.TrimSuffix(idsJSON(1, 16), "]")+",999,998]", ""), "the shared prefix only")
	assert.Equal(t, 0, chat("c5", idsJSON(1, 40), `,"cache_salt":"tenant-b"`), "a salt isolates the prompt")
	assert.Equal(t, 0, chat("c6", idsJSON(2, 40), ""), "another prompt")
}

func TestPrefixCachePoolsAreSeparate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{PromptTokensDetails: true})
	gen := func(profile, id string) []byte {
		body := `{"model":"sim-model","token_ids":` + idsJSON(7, 33) + `,"sampling_params":{"max_tokens":1}}`
		resp := post(t, e.gateway.URL+pathGenerate, legHeader(profile, id), body)
		require.Equal(t, http.StatusOK, resp.status, string(resp.body))
		return resp.body
	}
	_, ok := cachedOf(t, gen("prefill", "g1"))
	assert.False(t, ok, "tokens-in leaves a zero count out, as vLLM does")
	n, ok := cachedOf(t, gen("decode", "g2"))
	assert.False(t, ok, "the decode pool has its own cache: cold")
	assert.Equal(t, 0, n)
	n, _ = cachedOf(t, gen("prefill", "g3"))
	assert.Equal(t, 32, n)
}

func TestPrefixCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newPrefixCache()
	// Every block in one shard of two: the seed is random, so a hash that
	// spread blocks over shards could put both of first's in one.
	c.blocks = newMemory[uint64, struct{}](2*memoryShards, func(uint64) uint64 { return 0 })
	first := make([]uint32, 33)
	assert.Equal(t, 0, c.serve(nil, first))
	assert.Equal(t, 32, c.serve(nil, first))
	for i := range 200 {
		other := make([]uint32, 33)
		other[0] = uint32(i + 1)
		c.serve(nil, other)
	}
	assert.Less(t, c.serve(nil, first), 32, "old blocks are forgotten")
	assert.LessOrEqual(t, c.blocks.len(), 2)
}

func TestPromptTokensDetailsOffByDefault(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	body := `{"model":"sim-model","messages":[],"tokens":{"token_ids":` + idsJSON(1, 40) + `}}`
	for range 2 {
		resp := post(t, e.worker.URL+pathChat, nil, body)
		require.Equal(t, http.StatusOK, resp.status)
		assert.NotContains(t, string(resp.body), "prompt_tokens_details")
	}
}

func TestDecodeAfterRemotePrefill(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{PromptTokensDetails: true})
	remote := `"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"sim-prefill-0"}`
	body := `{"model":"sim-model","prompt":` + idsJSON(1, 21) + `,"max_tokens":2,` + remote + `}`
	resp := post(t, e.gateway.URL+pathCompletions, legHeader("decode", "d1"), body)
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	n, ok := cachedOf(t, resp.body)
	require.True(t, ok)
	assert.Equal(t, 21, n, "every token whose KV came from the prefill counts as cached")

	for name, ask := range map[string]string{"prompt_logprobs": `"prompt_logprobs":0`, "echo with logprobs": `"echo":true,"logprobs":1`} {
		resp := post(t, e.gateway.URL+pathCompletions, legHeader("decode", "d2"), strings.Replace(body, `"max_tokens":2`, `"max_tokens":2,`+ask, 1))
		assert.Equal(t, http.StatusInternalServerError, resp.status, name)
		assert.Contains(t, errorOf(t, resp.body).Message, "no prompt logits", name)
	}
}

// promptLogprobsView is vLLM's prompt_logprobs.
type promptLogprobsView []map[string]struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken *string `json:"decoded_token"`
}

func TestPromptLogprobsAreTheSameOnEveryPool(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	prompt := []uint32{2028, 4320, 574, 74345, 555}
	ids := mustJSON(t, prompt)
	prefill := post(t, e.gateway.URL+pathChat, legHeader("prefill", "p1"), `{"model":"sim-model","messages":[],"tokens":{"token_ids":`+ids+`},`+
		`"prompt_logprobs":2,"max_tokens":1,"stream":false,"kv_transfer_params":`+nixlPrefillKV+`}`)
	require.Equal(t, http.StatusOK, prefill.status, string(prefill.body))
	aggregated := post(t, e.worker.URL+pathChat, nil, `{"model":"sim-model","messages":[],"tokens":{"token_ids":`+ids+`},"prompt_logprobs":2}`)
	require.Equal(t, http.StatusOK, aggregated.status)
	generate := post(t, e.worker.URL+pathGenerate, nil, `{"model":"sim-model","token_ids":`+ids+`,"sampling_params":{"prompt_logprobs":2}}`)
	require.Equal(t, http.StatusOK, generate.status)

	type answer struct {
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	}
	want := jsonOf[answer](t, aggregated.body).PromptLogprobs
	assert.JSONEq(t, string(want), string(jsonOf[answer](t, prefill.body).PromptLogprobs))
	assert.JSONEq(t, string(want), string(jsonOf[answer](t, generate.body).PromptLogprobs))

	lp := jsonOf[promptLogprobsView](t, want)
	require.Len(t, lp, len(prompt))
	assert.Nil(t, lp[0], "the first token has no context")
	for i := 1; i < len(prompt); i++ {
		entry := lp[i]
		wantLP, wantRank := PromptLogprob(prompt, i)
		got, ok := entry[fmt.Sprint(prompt[i])]
		require.True(t, ok, "position %d holds the prompt token", i)
		assert.Equal(t, wantLP, got.Logprob)
		assert.Equal(t, wantRank, got.Rank)
		require.NotNil(t, got.DecodedToken)
		assert.Equal(t, wordAt(i).text, *got.DecodedToken, "decoded with cl100k_base")
		ranks := map[int]bool{}
		for _, v := range entry {
			ranks[v.Rank] = true
		}
		assert.True(t, ranks[1] && ranks[2], "the top 2 are there: %v", ranks)
		assert.Len(t, entry, map[bool]int{true: 2, false: 3}[wantRank <= 2])
	}
}

func TestPromptLogprobsRules(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	tests := []struct {
		name, path, body, msg string
	}{
		{"chat stream", pathChat, `{"messages":[],"tokens":{"token_ids":[1,2]},"prompt_logprobs":1,"stream":true}`, "not available when `stream=True`"},
		{"completions stream, all of them", pathCompletions, `{"prompt":[1,2],"prompt_logprobs":-1,"stream":true}`, "not available when `stream=True`"},
		{"whole vocabulary", pathCompletions, `{"prompt":[1,2],"prompt_logprobs":-1}`, "not simulated"},
		{"negative", pathChat, `{"messages":[],"tokens":{"token_ids":[1,2]},"prompt_logprobs":-2}`, "positive value or -1"},
		{"too many", pathGenerate, `{"token_ids":[1,2],"sampling_params":{"prompt_logprobs":21}}`, "at most 20"},
		{"text prompt", pathCompletions, `{"prompt":"hi","prompt_logprobs":1}`, "need a token-ID prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.worker.URL+tt.path, nil, tt.body)
			assert.Equal(t, http.StatusBadRequest, resp.status)
			assert.Contains(t, errorOf(t, resp.body).Message, tt.msg)
		})
	}
	resp := post(t, e.worker.URL+pathChat, nil, `{"messages":[],"tokens":{"token_ids":[1,2]},"prompt_logprobs":0,"stream":true}`)
	assert.Equal(t, http.StatusOK, resp.status, "0 on a stream is accepted and shows nothing")
	assert.NotContains(t, string(resp.body), "prompt_logprobs")
}

// completionView is a completions answer's first choice.
type completionView struct {
	Choices []struct {
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []*float64           `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func TestCompletionsEcho(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	prompt := []uint32{2028, 4320, 574} // "This answer was"
	body := `{"prompt":` + mustJSON(t, prompt) + `,"echo":true,"logprobs":1,"max_tokens":2}`
	resp := post(t, e.worker.URL+pathCompletions, nil, body)
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	c := jsonOf[completionView](t, resp.body).Choices[0]
	assert.Equal(t, "This answer wasThis answer", c.Text, "the prompt, then the generated text")
	require.NotNil(t, c.Logprobs)
	assert.Equal(t, []string{"This", " answer", " was", "This", " answer"}, c.Logprobs.Tokens)
	assert.Equal(t, []int{0, 4, 11, 15, 19}, c.Logprobs.TextOffset, "code points, continuing over the prompt")
	assert.Nil(t, c.Logprobs.TokenLogprobs[0])
	wantLP, _ := PromptLogprob(prompt, 1)
	assert.Equal(t, wantLP, *c.Logprobs.TokenLogprobs[1])
	assert.Nil(t, c.Logprobs.TopLogprobs[0])
	assert.LessOrEqual(t, len(c.Logprobs.TopLogprobs[1]), 2, "logprobs 1: at most 2 entries")
	assert.Len(t, c.Logprobs.TopLogprobs[3], 1)
	assert.NotEqual(t, "null", string(c.PromptLogprobs), "echo with logprobs computes the prompt logprobs")

	only := post(t, e.worker.URL+pathCompletions, nil, strings.Replace(body, `"max_tokens":2`, `"max_tokens":0`, 1))
	require.Equal(t, http.StatusOK, only.status, string(only.body))
	v := jsonOf[completionView](t, only.body)
	assert.Equal(t, "This answer was", v.Choices[0].Text, "echo without generation: the prompt alone")
	assert.Len(t, v.Choices[0].Logprobs.Tokens, 3)
	assert.Equal(t, 1, v.Usage.CompletionTokens, "the one token vLLM runs and does not show")

	text := post(t, e.worker.URL+pathCompletions, nil, `{"prompt":"Hi thé","echo":true,"max_tokens":1}`)
	require.Equal(t, http.StatusOK, text.status)
	assert.Equal(t, "Hi théThis", jsonOf[completionView](t, text.body).Choices[0].Text)
}

func TestCompletionsEchoStream(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	prompt := []uint32{2028, 4320, 574}
	resp := post(t, e.worker.URL+pathCompletions, nil, `{"prompt":`+mustJSON(t, prompt)+`,"echo":true,"logprobs":0,"max_tokens":3,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.status)
	events := sseData(t, resp.body)
	require.Len(t, events, 5) // three tokens, the finish, [DONE]
	var sent int
	for i, ev := range events[:3] {
		c := jsonOf[completionView](t, []byte(ev)).Choices[0]
		require.NotNil(t, c.Logprobs)
		if i == 0 {
			assert.Equal(t, "This answer wasThis", c.Text)
			assert.Equal(t, []int{0, 4, 11, 15}, c.Logprobs.TextOffset)
		} else {
			assert.Equal(t, []int{sent}, c.Logprobs.TextOffset, "later events count from the text sent so far")
		}
		sent += utf8.RuneCountInString(c.Text)
	}
}

func TestStrictPrefillMayEchoWithoutGeneration(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	leg := func(members string) response {
		return post(t, e.gateway.URL+pathCompletions, legHeader("prefill", "e1"),
			`{"model":"sim-model","prompt":[2028,4320],"kv_transfer_params":`+nixlPrefillKV+`,"stream":false,`+members+`}`)
	}
	resp := leg(`"max_tokens":0,"echo":true,"logprobs":0`)
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	assert.Equal(t, "This answer", jsonOf[completionView](t, resp.body).Choices[0].Text)
	resp = leg(`"max_tokens":0`)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	assert.Contains(t, errorOf(t, resp.body).Message, "max_tokens", "without echo, 0 is no token")
}
