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

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// restCompletion is one REST completions rollout: its request and what
// came back, read whole (a stream's events joined).
type restCompletion struct {
	relayedAnswer
	// tokens are the output's ids; prompts every prompt_token_ids.
	tokens  []uint32
	prompts [][]uint32
}

// completionRead is what a rollout reads of a completions answer or event.
type completionRead struct {
	ID      string `json:"id"`
	Choices []struct {
		Text           string   `json:"text"`
		TokenIDs       []uint32 `json:"token_ids"`
		PromptTokenIDs []uint32 `json:"prompt_token_ids"`
		FinishReason   *string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *restUsage `json:"usage"`
}

// read takes one answer or event in.
func (ro *restCompletion) read(data string) error {
	ro.raw = append(ro.raw, data)
	if data == "[DONE]" {
		ro.done++
		return nil
	}
	var a completionRead
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return fmt.Errorf("%s: %w: %s", ro.id, err, data)
	}
	ro.ids = append(ro.ids, a.ID)
	for _, c := range a.Choices {
		ro.text.WriteString(c.Text)
		ro.tokens = append(ro.tokens, c.TokenIDs...)
		if c.PromptTokenIDs != nil {
			ro.prompts = append(ro.prompts, c.PromptTokenIDs)
		}
		if c.FinishReason != nil {
			ro.finishes = append(ro.finishes, *c.FinishReason)
		}
	}
	if a.Usage != nil {
		ro.usage, ro.usages = *a.Usage, ro.usages+1
	}
	return nil
}

// postCompletion sends the rollout with header and reads its answer (on
// any goroutine: it reports, never fails the test).
func (r *rlStack) postCompletion(ctx context.Context, ro *restCompletion, header http.Header) {
	ro.status, ro.header, ro.err = r.postRollout(ctx, "/v1/completions", ro.id, ro.body, ro.stream, header, ro.read)
}

// startCompletions sends the rollouts (each once) and returns a channel
// of their outcomes.
func (r *rlStack) startCompletions(rollouts []*restCompletion, header http.Header) <-chan *restCompletion {
	return sendRollouts(rollouts, func(ctx context.Context, ro *restCompletion) { r.postCompletion(ctx, ro, header) })
}

func (ro *restCompletion) rolloutID() string { return ro.id }

// completionPrompt is rollout i's prompt: token IDs none of which the
// simulator's output has.
func completionPrompt(i int) []uint32 { return []uint32{9000 + uint32(i), 9100, 9101} }

// completionRollouts are n completions (ids prefix-i) of a token-ID
// prompt (the last texts of them a text prompt, which the render step
// tokenizes), ignore_eos and maxTokens, every other one streamed with
// the usage; extra members appended.
func completionRollouts(prefix string, n, texts, maxTokens int, extra string) []*restCompletion {
	out := make([]*restCompletion, n)
	for i := range out {
		stream := i%2 == 1
		prompt, _ := json.Marshal(completionPrompt(i))
		if i >= n-texts {
			prompt, _ = json.Marshal(fmt.Sprintf("rollout %d", i))
		}
		body := fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":%d,"ignore_eos":true%s`, sim.DefaultModel, prompt, maxTokens, extra)
		if stream {
			body += `,"stream":true,"stream_options":{"include_usage":true}`
		}
		out[i] = &restCompletion{relayedAnswer: relayedAnswer{id: fmt.Sprintf("%s-%d", prefix, i), stream: stream, body: body + "}"}}
	}
	return out
}

// TestACompletionPauseAbortIsContinued: 10 REST completions rollouts (5
// streamed with the usage) of a token-ID prompt (2 of a text prompt the
// render step tokenizes) and return_token_ids in flight through render
// and P/D; a pause (abort) ends each on its engine,
// the coordinator holds it, v2 is set, the resume continues it. Each
// client gets one answer: the uninterrupted text and token_ids, one
// finish_reason (length), the uninterrupted usage once, the prompt's
// token ids once; a stream one id and one [DONE]. Each rollout's
// second decode leg is its continuation: a new leg id, prefilled again,
// its prompt the client's and the output so far, the budget left.
func TestACompletionPauseAbortIsContinued(t *testing.T) {
	t.Parallel()
	const rollouts, texts, maxTokens = 10, 2, 60
	const ids = `,"return_token_ids":true`
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}, TokenDelay: 50 * time.Millisecond})
	_, err := r.control.ListWorkers(t.Context(), &coordinatorv1.ListWorkersRequest{}) // the fleet's version is known: v1
	require.NoError(t, err)
	out := r.startCompletions(completionRollouts("cmpl-cont", rollouts, texts, maxTokens, ids), nil)
	r.pauseAcross(t, rollouts/2, rollouts)
	got := collectRollouts(t, out, rollouts)

	uninterrupted := collectRollouts(t, r.startCompletions(completionRollouts("cmpl-whole", rollouts, texts, maxTokens, ids), nil), rollouts)
	streamed := 0
	for i := range rollouts {
		ro, whole := got[fmt.Sprintf("cmpl-cont-%d", i)], uninterrupted[fmt.Sprintf("cmpl-whole-%d", i)]
		require.NoError(t, whole.err)
		require.Equal(t, http.StatusOK, whole.status, "%v", whole.raw)
		require.Equal(t, sim.ChatText(maxTokens), whole.text.String(), "not vacuous: the simulator's text")
		require.Len(t, whole.tokens, maxTokens, "not vacuous: the simulator's token ids")
		require.Len(t, whole.prompts, 1, "the prompt's token ids")
		prompt := whole.prompts[0]
		if i < rollouts-texts {
			require.Equal(t, completionPrompt(i), prompt, "the client's token ids")
		}
		assertCompletionUninterrupted(t, ro, whole, prompt)
		if ro.stream {
			streamed++
		}
		assertCompletionContinuationLegs(t, r, ro.id, prompt, whole.tokens)
	}
	assert.Equal(t, rollouts/2, streamed)
}

// assertCompletionUninterrupted checks a continued completion against the
// same one uninterrupted.
func assertCompletionUninterrupted(t *testing.T, ro, whole *restCompletion, prompt []uint32) {
	t.Helper()
	ro.assertOneAnswer(t, &whole.relayedAnswer)
	assert.Equal(t, whole.tokens, ro.tokens, "%s: the uninterrupted token ids", ro.id)
	assert.Equal(t, [][]uint32{prompt}, ro.prompts, "%s: the prompt's ids, once", ro.id)
}

// assertCompletionContinuationLegs checks a continued completion's legs:
// two decode legs under two leg ids, each prefilled; the second one's
// prompt is the client's and the output before the pause (a prefix of
// output), its max_tokens the budget left.
func assertCompletionContinuationLegs(t *testing.T, r *rlStack, id string, prompt, output []uint32) {
	t.Helper()
	decode := pdLegs(r.sim, id, "decode")
	require.Len(t, decode, 2, "%s: the aborted leg and its continuation", id)
	assert.NotEqual(t, decode[0].Header.Get("X-Request-Id"), decode[1].Header.Get("X-Request-Id"), "%s: a new leg id", id)
	assert.Len(t, pdLegs(r.sim, id, "prefill"), 2, "%s: the continuation is prefilled again", id)
	var next struct {
		Prompt    []uint32 `json:"prompt"`
		MaxTokens int      `json:"max_tokens"`
	}
	require.NoError(t, json.Unmarshal(decode[1].Body, &next), id)
	require.Greater(t, len(next.Prompt), len(prompt), id)
	assert.Equal(t, prompt, next.Prompt[:len(prompt)], "%s: the client's prompt first", id)
	done := len(next.Prompt) - len(prompt)
	assert.Less(t, done, len(output), id)
	assert.Equal(t, output[:done], next.Prompt[len(prompt):], "%s: then the output before the pause", id)
	assert.Equal(t, len(output)-done, next.MaxTokens, "%s: the budget left", id)
}

// TestACompletionNotContinuableKeepsTheAbort: completions the coordinator
// cannot continue (no return_token_ids; logprobs) end at a pause (abort)
// with finish_reason abort and the text so far, as the engine answered,
// never run again.
func TestACompletionNotContinuableKeepsTheAbort(t *testing.T) {
	t.Parallel()
	const maxTokens = 400
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Decode: 2}, TokenDelay: 20 * time.Millisecond})
	rollouts := append(completionRollouts("cmpl-noids", 2, 0, maxTokens, ""),
		completionRollouts("cmpl-logprobs", 2, 0, maxTokens, `,"return_token_ids":true,"logprobs":1`)...)
	out := r.startCompletions(rollouts, nil)
	for _, e := range r.engines("decode") {
		require.NoError(t, e.WaitStarted(waitCtx(t), len(rollouts)/2, 3))
	}
	_, err := r.control.Pause(t.Context(), &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	for id, ro := range collectRollouts(t, out, len(rollouts)) {
		require.NoError(t, ro.err, id)
		require.Equal(t, http.StatusOK, ro.status, "%s: %v", id, ro.raw)
		assert.Equal(t, []string{"abort"}, ro.finishes, id)
		done := tokensOf(ro.text.String(), maxTokens)
		assert.Positive(t, done, "%s: the text before the pause: %q", id, ro.text.String())
		assert.Less(t, done, maxTokens, id)
		assert.Len(t, pdLegs(r.sim, id, "decode"), 1, "%s: not continued", id)
		if ro.stream {
			assert.Equal(t, "[DONE]", ro.raw[len(ro.raw)-1], id)
			assert.Equal(t, 1, ro.usages, "%s: the engine's usage, relayed", id)
			assert.Contains(t, strings.Join(ro.raw, "\n"), `"text":"","logprobs":null,"finish_reason":"abort"}]}`, "%s: the abort as the engine sent it", id)
		}
	}
	_, err = r.control.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
}

// TestACompletionNotPausedIsRelayedAsIs: with the continuation on, a
// completion no pause aborted (return_token_ids, unary and streamed with
// the usage) is the very bytes the coordinator relays with it off (opted
// out), but for the leg's id and the time.
func TestACompletionNotPausedIsRelayedAsIs(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 1, Decode: 1}})
	optOut := http.Header{"X-Coordinator-Continue-On-Pause": {"false"}}
	for _, ro := range completionRollouts("cmpl-asis", 2, 0, 7, `,"return_token_ids":true`) {
		var answers [2][]string
		for i, h := range []http.Header{nil, optOut} {
			run := &restCompletion{relayedAnswer: relayedAnswer{id: fmt.Sprintf("%s-%d", ro.id, i), stream: ro.stream, body: ro.body}}
			r.postCompletion(t.Context(), run, h)
			require.NoError(t, run.err)
			require.Equal(t, http.StatusOK, run.status, "%v", run.raw)
			require.Equal(t, sim.ChatText(7), run.text.String())
			require.Len(t, run.tokens, 7, "not vacuous: the token ids")
			for _, a := range run.raw {
				answers[i] = append(answers[i], chatVarying.ReplaceAllString(a, `"-":0`))
			}
		}
		assert.Equal(t, answers[1], answers[0], "stream %t: the worker's answer as relayed without the continuation", ro.stream)
		assert.Contains(t, answers[0][0], `"-":0`, "stream %t: not vacuous", ro.stream)
	}
}
