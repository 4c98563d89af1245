package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// The differential test of compat decisions D21 and D22: the same requests
// through a decode-only pipeline and through render/prefill/decode with
// kv-nixl, each against its own simulator (same state, same answers), must
// give the same answers field for field but ids, timestamps and
// kv_transfer_params: after P/D the cached tokens are the prefill worker's
// prefix-cache hits, not the decode worker's remote-KV count, and the prompt
// logprobs come from the prefill worker, the decode worker having none.

const pdAggregated = `
pipeline:
  kv_connector: kv-nixl
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: decode
`

const pdDisaggregated = `
pipeline:
  kv_connector: kv-nixl
  use_openai_format: %t
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: prefill
    - type: decode
`

// pdSide is one pipeline with its simulator.
type pdSide struct {
	sim *sim.Sim
	st  *stack
}

func startPDSide(t *testing.T, yaml string) pdSide {
	t.Helper()
	s, gw, render := startSim(t, sim.Options{Strict: true, PromptTokensDetails: true, OutputTokens: 4})
	return pdSide{sim: s, st: startStack(t, gw, render, yaml)}
}

// pdPrompt is long enough (over two 16-token blocks once rendered) that a
// repeated prompt hits the prefix cache; tag makes it the case's own.
func pdPrompt(tag string) string {
	return "Case " + tag + ": explain why a prefill worker and a decode worker would each keep their own prefix cache, " +
		"and what the client should be billed for when the prompt comes back a second time."
}

// pdIDs is a tokens-in prompt of 40 IDs, the case's own.
func pdIDs(seed uint32) []uint32 {
	ids := make([]uint32, 40)
	for i := range ids {
		ids[i] = 1000 + seed*100 + uint32(i)
	}
	return ids
}

// pdRESTCase is one REST request of the differential test.
type pdRESTCase struct {
	name, path, body string
	stream           bool
	// promptLogprobs: the answer must carry prompt logprobs (in the JSON,
	// or, for a streamed echo, in its first events).
	promptLogprobs bool
	// status, when not 200, is what both sides answer.
	status int
}

func pdRESTCases() []pdRESTCase {
	chat := func(tag, extra string) string {
		return `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":"` + pdPrompt(tag) + `"}]` + extra + `}`
	}
	completions := func(tag, extra string) string {
		return `{"model":"sim-model","max_tokens":3,"prompt":"` + pdPrompt(tag) + `"` + extra + `}`
	}
	generate := func(seed uint32, extra string) string {
		ids, _ := json.Marshal(pdIDs(seed))
		return `{"model":"sim-model","token_ids":` + string(ids) + `,"sampling_params":{"max_tokens":3` + extra + `}`
	}
	usage := `,"stream":true,"stream_options":{"include_usage":true}`
	return []pdRESTCase{
		{name: "chat", path: "/v1/chat/completions", body: chat("chat", "")},
		{name: "chat prompt_logprobs", path: "/v1/chat/completions", body: chat("chat-lp", `,"prompt_logprobs":2`), promptLogprobs: true},
		{name: "chat stream", path: "/v1/chat/completions", body: chat("chat-stream", usage), stream: true},
		{name: "chat stream prompt_logprobs 0", path: "/v1/chat/completions", body: chat("chat-stream-lp0", usage+`,"prompt_logprobs":0`), stream: true},
		{name: "chat stream prompt_logprobs 3", path: "/v1/chat/completions", body: chat("chat-stream-lp3", usage+`,"prompt_logprobs":3`),
			stream: true, status: http.StatusBadRequest},
		{name: "completions prompt_logprobs n=2", path: "/v1/completions", body: completions("cmpl-lp", `,"prompt_logprobs":1,"n":2`), promptLogprobs: true},
		{name: "completions stream", path: "/v1/completions", body: completions("cmpl-stream", usage), stream: true},
		{name: "completions echo logprobs", path: "/v1/completions", body: completions("cmpl-echo", `,"echo":true,"logprobs":1`), promptLogprobs: true},
		{name: "completions echo logprobs stream", path: "/v1/completions", body: completions("cmpl-echo-stream", `,"echo":true,"logprobs":2,"n":2`+usage),
			stream: true, promptLogprobs: true},
		{name: "generate prompt_logprobs", path: "/inference/v1/generate", body: generate(1, `,"prompt_logprobs":2}`), promptLogprobs: true},
		{name: "generate stream", path: "/inference/v1/generate", body: generate(2, `,"logprobs":1}`+usage), stream: true},
	}
}

// pdRESTAnswer is a normalized REST answer: the status and the JSON body,
// or each event of a stream, without ids, timestamps and
// kv_transfer_params.
type pdRESTAnswer struct {
	Status int
	Body   any
	Events []any
}

func (p pdSide) rest(t *testing.T, c pdRESTCase, id string) pdRESTAnswer {
	t.Helper()
	resp := p.st.post(t, c.path, c.body, http.Header{"X-Request-Id": {id}})
	a := pdRESTAnswer{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || !c.stream {
		body := readAll(t, resp.Body)
		if resp.StatusCode == http.StatusOK {
			a.Body = pdNormalize(t, body)
		}
		return a
	}
	for _, ev := range sseData(t, resp.Body) {
		if ev == "[DONE]" {
			a.Events = append(a.Events, ev)
			continue
		}
		a.Events = append(a.Events, pdNormalize(t, ev))
	}
	return a
}

// pdNormalize decodes an answer (numbers kept as written) without the
// members that differ by construction.
func pdNormalize(t *testing.T, body string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), body)
	for _, k := range []string{"id", "request_id", "created", "kv_transfer_params"} {
		delete(m, k)
	}
	return m
}

// pdCached is usage.prompt_tokens_details.cached_tokens of a normalized
// answer or event; ok is false without one.
func pdCached(v any) (string, bool) {
	m, _ := v.(map[string]any)
	usage, _ := m["usage"].(map[string]any)
	details, _ := usage["prompt_tokens_details"].(map[string]any)
	n, ok := details["cached_tokens"].(json.Number)
	return string(n), ok
}

// pdHasPromptLogprobs reports prompt logprobs in a normalized answer: at the
// top level or in a choice, or, for a completions echo, as logprobs longer
// than the generated text.
func pdHasPromptLogprobs(v any) bool {
	m, _ := v.(map[string]any)
	if lp, ok := m["prompt_logprobs"].([]any); ok && len(lp) > 0 {
		return true
	}
	choices, _ := m["choices"].([]any)
	for _, c := range choices {
		cm, _ := c.(map[string]any)
		if lp, ok := cm["prompt_logprobs"].([]any); ok && len(lp) > 0 {
			return true
		}
		lps, _ := cm["logprobs"].(map[string]any)
		if tokens, _ := lps["tokens"].([]any); len(tokens) > 3 { // more than any one event or answer generates
			return true
		}
	}
	return false
}

// eachPDPair runs fn, in parallel, on an aggregated and a disaggregated
// side, with use_openai_format on and off.
func eachPDPair(t *testing.T, fn func(t *testing.T, agg, pd pdSide)) {
	for _, openAIFormat := range []bool{true, false} {
		t.Run(fmt.Sprintf("use_openai_format=%t", openAIFormat), func(t *testing.T) {
			t.Parallel()
			fn(t, startPDSide(t, pdAggregated), startPDSide(t, fmt.Sprintf(pdDisaggregated, openAIFormat)))
		})
	}
}

func TestPDAnswersReadLikeAggregatedOnes(t *testing.T) {
	t.Parallel()
	eachPDPair(t, func(t *testing.T, agg, pd pdSide) {
		for i, c := range pdRESTCases() {
			for round, temp := range []string{"cold", "repeated"} {
				id := fmt.Sprintf("pd-%d-%d", i, round)
				want := agg.rest(t, c, id)
				got := pd.rest(t, c, id)
				require.Equal(t, pdStatus(c), want.Status, "%s %s: aggregated %v", c.name, temp, want.Body)
				assert.Equal(t, want, got, "%s, %s prompt", c.name, temp)
				if want.Status != http.StatusOK {
					continue
				}
				pdCheckNotVacuous(t, c, got, round == 1)
				assert.NotEmpty(t, pdLegs(pd.sim, id, "prefill"), "%s: a prefill leg ran", c.name)
			}
		}
	})
}

func pdStatus(c pdRESTCase) int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}

// pdCheckNotVacuous checks that the compared answers hold what D21 and D22
// are about: a count that is 0 cold and a hit on the repeated prompt
// (tokens-in answers leave a zero count out), prompt logprobs when asked.
func pdCheckNotVacuous(t *testing.T, c pdRESTCase, a pdRESTAnswer, repeated bool) {
	t.Helper()
	final := a.Body
	if c.stream {
		require.GreaterOrEqual(t, len(a.Events), 2, c.name)
		final = a.Events[len(a.Events)-2] // the usage event, before [DONE]
	}
	cached, ok := pdCached(final)
	switch {
	case repeated:
		assert.True(t, ok && cached != "0", "%s: the repeated prompt hits the prefill's cache: %v", c.name, final)
	case strings.HasPrefix(c.path, "/inference"):
		assert.False(t, ok, "%s: tokens-in leaves a zero count out", c.name)
	default:
		assert.Equal(t, "0", cached, "%s: a cold prompt has nothing cached, whatever decode received", c.name)
	}
	if !c.promptLogprobs {
		return
	}
	answers := []any{a.Body}
	if c.stream {
		answers = a.Events
	}
	found := false
	for _, v := range answers {
		found = found || pdHasPromptLogprobs(v)
	}
	assert.True(t, found, "%s: the prompt logprobs reach the client", c.name)
}

// pdLegs are the legs of a request id to a profile.
func pdLegs(s *sim.Sim, id, profile string) []sim.Leg {
	var out []sim.Leg
	for _, l := range s.Legs() {
		if headers.IsLegRequestID(l.Header.Get("X-Request-Id"), id) && l.Profile == profile {
			out = append(out, l)
		}
	}
	return out
}

func TestPDTokensAnswersReadLikeAggregatedOnes(t *testing.T) {
	t.Parallel()
	agg := startPDSide(t, pdAggregated)
	pd := startPDSide(t, fmt.Sprintf(pdDisaggregated, true))
	request := func(seed uint32, promptLogprobs bool) *coordinatorv1.TokensRequest {
		sp := &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(3), Logprobs: proto.Uint32(1)}
		if promptLogprobs {
			sp.PromptLogprobs = proto.Uint32(2)
		}
		return &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: pdIDs(seed), Sampling: sp}
	}

	t.Run("Generate", func(t *testing.T) {
		for round := range 2 {
			id := fmt.Sprintf("pd-tokens-%d", round)
			unary := func(p pdSide) *coordinatorv1.TokensResponse {
				resp, err := coordinatorv1.NewCoordinatorServiceClient(p.st.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
					RequestId: id, Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: request(10, true)}})
				require.NoError(t, err)
				return resp.GetTokens()
			}
			want, got := unary(agg), unary(pd)
			assert.True(t, proto.Equal(want, got), "round %d:\naggregated %v\ndisaggregated %v", round, want, got)
			assert.Len(t, got.GetPromptLogprobs(), 40, "one per prompt token")
			assert.NotNil(t, got.GetPromptLogprobs()[1].Logprob)
			if round == 0 {
				assert.Nil(t, got.GetUsage().CachedTokens, "cold: nothing cached (tokens-in leaves 0 out)")
			} else {
				assert.Equal(t, uint32(32), got.GetUsage().GetCachedTokens(), "two whole blocks of the repeated prompt")
			}
			assert.Len(t, pdLegs(pd.sim, id, "prefill"), 1)
		}
	})
	t.Run("GenerateStream", func(t *testing.T) {
		for round := range 2 {
			id := fmt.Sprintf("pd-tokens-stream-%d", round)
			streamed := func(p pdSide) ([]choiceView, *coordinatorv1.Usage) {
				stream, err := coordinatorv1.NewCoordinatorServiceClient(p.st.conn).GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
					RequestId: id, Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: request(11, false)}})
				require.NoError(t, err)
				views, usage, _, err := recvTokens(stream)
				require.NoError(t, err)
				return views, usage
			}
			wantViews, wantUsage := streamed(agg)
			gotViews, gotUsage := streamed(pd)
			assert.Equal(t, wantViews, gotViews)
			assert.True(t, proto.Equal(wantUsage, gotUsage), "round %d: %v vs %v", round, wantUsage, gotUsage)
			assert.Equal(t, round == 1, gotUsage.CachedTokens != nil, "round %d: %v", round, gotUsage)
		}
	})
}

func TestPDMetricBillsThePrefillsHits(t *testing.T) {
	t.Parallel()
	pd := startPDSide(t, fmt.Sprintf(pdDisaggregated, true))
	c := pdRESTCases()[0]
	var prompt int
	for round := range 2 {
		resp := pd.st.post(t, c.path, c.body, http.Header{"X-Request-Id": {fmt.Sprintf("pd-metric-%d", round)}})
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var a struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&a))
		prompt = a.Usage.PromptTokens
	}
	require.Greater(t, prompt, 32)
	cached := 32 // the repeated prompt's whole blocks; the cold one has none
	assert.Equal(t, fmt.Sprint(cached), pd.st.scrape(t, `coordinator_prompt_tokens_billed_total{kind="cached"}`))
	assert.Equal(t, fmt.Sprint(2*prompt-cached), pd.st.scrape(t, `coordinator_prompt_tokens_billed_total{kind="computed"}`))
}
