package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// restGenerate is one REST /inference/v1/generate rollout: its request
// and what came back, read whole (a stream's events joined).
type restGenerate struct {
	id     string
	prompt []uint32
	stream bool
	// raw is the answer's body, or each event's data.
	raw []string
	// tokens, logprobs (their tokens and values), finishes (every
	// finish_reason not null), spans (the last weight_versions), usages
	// and done ([DONE] events) read from it.
	tokens   []uint32
	lpTokens []uint32
	lpValues []float32
	finishes []string
	spans    []spanView
	usage    restUsage
	usages   int
	done     int
	status   int
	header   http.Header
	err      error
}

type restUsage struct {
	PromptTokens     uint32 `json:"prompt_tokens"`
	CompletionTokens uint32 `json:"completion_tokens"`
	TotalTokens      uint32 `json:"total_tokens"`
}

// restAnswer is what a rollout reads of a GenerateResponse or of a
// GenerateStreamResponse event.
type restAnswer struct {
	Choices []struct {
		TokenIDs []uint32 `json:"token_ids"`
		Logprobs *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float32 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason   *string `json:"finish_reason"`
		WeightVersions []struct {
			Version    string `json:"version"`
			Start, End uint32
		} `json:"weight_versions"`
	} `json:"choices"`
	Usage *restUsage `json:"usage"`
}

// read takes one answer or event in.
func (ro *restGenerate) read(data string) error {
	ro.raw = append(ro.raw, data)
	if data == "[DONE]" {
		ro.done++
		return nil
	}
	var a restAnswer
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return fmt.Errorf("%s: %w: %s", ro.id, err, data)
	}
	for _, c := range a.Choices {
		ro.tokens = append(ro.tokens, c.TokenIDs...)
		if c.Logprobs != nil {
			for _, e := range c.Logprobs.Content {
				id, err := strconv.ParseUint(strings.TrimPrefix(e.Token, "token_id:"), 10, 32)
				if err != nil {
					return fmt.Errorf("%s: logprob token %q", ro.id, e.Token)
				}
				ro.lpTokens, ro.lpValues = append(ro.lpTokens, uint32(id)), append(ro.lpValues, e.Logprob)
			}
		}
		if c.FinishReason != nil {
			ro.finishes = append(ro.finishes, *c.FinishReason)
		}
		if c.WeightVersions != nil {
			ro.spans = nil
			for _, s := range c.WeightVersions {
				ro.spans = append(ro.spans, spanView{Version: s.Version, Start: s.Start, Count: s.End - s.Start})
			}
		}
	}
	if a.Usage != nil {
		ro.usage, ro.usages = *a.Usage, ro.usages+1
	}
	return nil
}

// generateBody is a rollout's body: ignore_eos, maxTokens, logprobs 1;
// streamed with the usage.
func generateBody(prompt []uint32, maxTokens int, stream bool) string {
	ids, _ := json.Marshal(prompt)
	body := fmt.Sprintf(`{"model":%q,"token_ids":%s,"sampling_params":{"max_tokens":%d,"ignore_eos":true,"logprobs":1}`, sim.DefaultModel, ids, maxTokens)
	if stream {
		body += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return body + "}"
}

// postGenerate sends the rollout with header and reads its answer (on any
// goroutine: it reports, never fails the test).
func (r *rlStack) postGenerate(ctx context.Context, ro *restGenerate, maxTokens int, header http.Header) {
	ro.status, ro.header, ro.err = r.postRollout(ctx, "/inference/v1/generate", ro.id, generateBody(ro.prompt, maxTokens, ro.stream), ro.stream, header, ro.read)
}

// startGenerates sends n REST rollouts, ids prefix-i, every other one
// streamed, and returns a channel of their outcomes.
func (r *rlStack) startGenerates(prefix string, n, maxTokens int, header http.Header) <-chan *restGenerate {
	rollouts := make([]*restGenerate, n)
	for i := range rollouts {
		rollouts[i] = &restGenerate{id: fmt.Sprintf("%s-%d", prefix, i), prompt: []uint32{uint32(700 + i), 21, 22}, stream: i%2 == 1}
	}
	return sendRollouts(rollouts, func(ctx context.Context, ro *restGenerate) { r.postGenerate(ctx, ro, maxTokens, header) })
}

func (ro restGenerate) rolloutID() string { return ro.id }

// pauseAcross pauses the fleet (abort) once every decode engine runs
// perEngine rollouts that each have a few v1 tokens, waits until the
// coordinator holds held of them, sets v2 and resumes.
func (r *rlStack) pauseAcross(t *testing.T, perEngine int, held uint32) {
	t.Helper()
	ctx := t.Context()
	for _, e := range r.engines("decode") {
		require.NoError(t, e.WaitStarted(waitCtx(t), perEngine, 3))
	}
	_, err := r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
		return err == nil && l.GetHeldRequests() == held
	}, time.Minute, 5*time.Millisecond, "every aborted rollout waits for the resume")
	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2"})
	require.NoError(t, err)
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
}

// assertGenerateUninterrupted checks a continued REST rollout against the
// simulator's uninterrupted answer: every token once and in order, each
// logprob the token's, one finish_reason (length), usage once and as one
// answer's, weight versions v1 then v2 covering the output; a stream ends
// with one [DONE].
func assertGenerateUninterrupted(t *testing.T, ro restGenerate, maxTokens int) {
	t.Helper()
	id := ro.id
	require.NoError(t, ro.err, id)
	require.Equal(t, http.StatusOK, ro.status, "%s: %v", id, ro.raw)
	want := sim.CompletionTokens(ro.prompt, maxTokens, 0)
	assert.Equal(t, want, ro.tokens, "%s: every token once, in order", id)
	assert.Equal(t, want, ro.lpTokens, "%s: a logprob per token", id)
	for i, v := range ro.lpValues {
		if !assert.Equal(t, sim.TokenLogprob(ro.prompt, 0, i), v, "%s: logprob %d is the uninterrupted one", id, i) {
			break
		}
	}
	assert.Equal(t, []string{"length"}, ro.finishes, "%s: one finish_reason, the real end", id)
	assert.Equal(t, 1, ro.usages, "%s: usage once", id)
	assert.Equal(t, restUsage{PromptTokens: uint32(len(ro.prompt)), CompletionTokens: uint32(maxTokens), TotalTokens: uint32(len(ro.prompt) + maxTokens)}, ro.usage, id)
	require.Len(t, ro.spans, 2, "%s: v1 before the pause, v2 after it: %v", id, ro.spans)
	assert.Equal(t, spanView{Version: "v1", Start: 0, Count: ro.spans[0].Count}, ro.spans[0], id)
	assert.NotZero(t, ro.spans[0].Count, id)
	assert.Equal(t, spanView{Version: "v2", Start: ro.spans[0].Count, Count: uint32(maxTokens) - ro.spans[0].Count}, ro.spans[1], id)
	if ro.stream {
		assert.Equal(t, 1, ro.done, "%s: one [DONE]", id)
		assert.Equal(t, "[DONE]", ro.raw[len(ro.raw)-1], id)
	}
	if ro.stream { // its header went out with its first event
		return
	}
	for _, k := range []string{"Date", "Server-Timing", "X-Prefill-Weight-Version"} {
		assert.Len(t, ro.header.Values(k), 1, "%s: one answer's header %s", id, k)
	}
	assert.Equal(t, []string{"v1,v2"}, ro.header.Values("X-Weight-Version"), "%s: the versions of the whole answer", id)
}

// TestARESTGeneratePauseAbortIsContinued: 16 REST /inference/v1/generate
// rollouts (8 streamed, 8 not) in flight over P/D; a pause (abort) through
// the control service ends each on its engine, the coordinator holds it,
// v2 is set, the resume continues it. Each client gets one answer: the
// uninterrupted tokens and logprobs, usage once, the versions changing
// where the pause fell; each rollout's second decode leg is its
// continuation under a new leg id, prefilled again.
func TestARESTGeneratePauseAbortIsContinued(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 16, 60
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}, TokenDelay: 50 * time.Millisecond})
	_, err := r.control.ListWorkers(t.Context(), &coordinatorv1.ListWorkersRequest{}) // the fleet's version is known: v1
	require.NoError(t, err)
	out := r.startGenerates("rest-cont", rollouts, maxTokens, nil)
	r.pauseAcross(t, rollouts/2, rollouts) // round robin: 8 decode legs on each engine
	streamed := 0
	for id, ro := range collectRollouts(t, out, rollouts) {
		assertGenerateUninterrupted(t, *ro, maxTokens)
		if ro.stream {
			streamed++
			for _, ev := range ro.raw {
				assert.NotContains(t, ev, `"abort"`, "%s: the abort is held back", id)
			}
		}
		decode := pdLegs(r.sim, id, "decode")
		require.Len(t, decode, 2, "%s: the aborted leg and its continuation", id)
		assert.NotEqual(t, decode[0].Header.Get("X-Request-Id"), decode[1].Header.Get("X-Request-Id"), "%s: a new leg id", id)
		assert.Len(t, pdLegs(r.sim, id, "prefill"), 2, "%s: the continuation is prefilled again", id)
		var next struct {
			TokenIDs       []uint32       `json:"token_ids"`
			SamplingParams map[string]any `json:"sampling_params"`
		}
		require.NoError(t, json.Unmarshal(decode[1].Body, &next), id)
		done := int(ro.spans[0].Count)
		assert.Equal(t, append(append([]uint32{}, ro.prompt...), ro.tokens[:done]...), next.TokenIDs, "%s: prompt and output so far", id)
		assert.InDelta(t, maxTokens-done, next.SamplingParams["max_tokens"], 0, "%s: the budget left", id)
	}
	assert.Equal(t, rollouts/2, streamed)
}

// requestIDValue matches a generate answer's request_id member, which
// names the leg and so differs by construction.
var requestIDValue = regexp.MustCompile(`"request_id":"[^"]*"`)

// TestARESTGenerateNotPausedIsRelayedAsIs: with the continuation on, an
// answer no pause aborted (unary and streamed) is the very bytes the
// coordinator relays with it off (opted out), but for the leg's id.
func TestARESTGenerateNotPausedIsRelayedAsIs(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 1, Decode: 1}})
	optOut := http.Header{"X-Coordinator-Continue-On-Pause": {"false"}}
	for _, stream := range []bool{false, true} {
		var answers [2][]string
		for i, h := range []http.Header{nil, optOut} {
			ro := restGenerate{id: fmt.Sprintf("asis-%t-%d", stream, i), prompt: []uint32{901, 5, 6}, stream: stream}
			r.postGenerate(t.Context(), &ro, 7, h)
			require.NoError(t, ro.err)
			require.Equal(t, http.StatusOK, ro.status, "%v", ro.raw)
			require.Len(t, ro.tokens, 7)
			for _, a := range ro.raw {
				answers[i] = append(answers[i], requestIDValue.ReplaceAllString(a, `"request_id":"-"`))
			}
		}
		assert.Equal(t, answers[1], answers[0], "stream %t: the worker's answer as relayed without the continuation", stream)
		assert.True(t, bytes.Contains([]byte(answers[0][0]), []byte(`"request_id":"-"`)), "stream %t: not vacuous", stream)
	}
}

// TestARESTGenerateOptedOutKeepsTheAbort: a REST rollout that opted out
// (x-coordinator-continue-on-pause: false) ends at a pause (abort) with
// finish_reason abort and the tokens so far, as the engine answered.
func TestARESTGenerateOptedOutKeepsTheAbort(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 4, 400
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Decode: 2}, TokenDelay: 20 * time.Millisecond})
	out := r.startGenerates("rest-abort", rollouts, maxTokens, http.Header{"X-Coordinator-Continue-On-Pause": {"false"}})
	for _, e := range r.engines("decode") {
		require.NoError(t, e.WaitStarted(waitCtx(t), rollouts/2, 3))
	}
	_, err := r.control.Pause(t.Context(), &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	for id, ro := range collectRollouts(t, out, rollouts) {
		require.NoError(t, ro.err, id)
		require.Equal(t, http.StatusOK, ro.status, "%s: %v", id, ro.raw)
		assert.Contains(t, ro.finishes, "abort", id)
		require.NotEmpty(t, ro.tokens, id)
		assert.Less(t, len(ro.tokens), maxTokens, id)
		assert.Equal(t, sim.CompletionTokens(ro.prompt, maxTokens, 0)[:len(ro.tokens)], ro.tokens, "%s: the partial tokens", id)
		assert.Len(t, pdLegs(r.sim, id, "decode"), 1, "%s: not continued", id)
	}
	_, err = r.control.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
}

// TestARESTGenerateContinuationWaitIsBounded: REST rollouts a pause
// (abort) stopped whose resume never comes end at control.hold.max_wait:
// the unary one with 503, the streamed one with an error event after its
// tokens, each saying what became of it; a malformed opt-out is refused.
func TestARESTGenerateContinuationWaitIsBounded(t *testing.T) {
	t.Parallel()
	const rollouts = 2
	r := startRLStackHolding(t, sim.Options{Engines: sim.EngineCounts{Decode: 1}, TokenDelay: 20 * time.Millisecond}, "2s")
	out := r.startGenerates("rest-wait", rollouts, 400, nil)
	require.NoError(t, r.engines("decode")[0].WaitStarted(waitCtx(t), rollouts, 3))
	_, err := r.control.Pause(t.Context(), &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	const stopped = "could not be continued: the inference fleet is paused for a weight update and did not resume within control.hold.max_wait (2s)"
	for id, ro := range collectRollouts(t, out, rollouts) {
		last := ro.raw[len(ro.raw)-1]
		if !ro.stream {
			assert.Equal(t, http.StatusServiceUnavailable, ro.status, "%s: %s", id, last)
			assert.Contains(t, last, "a fleet pause stopped this request after", id)
			assert.Contains(t, last, stopped, id)
			continue
		}
		assert.Equal(t, http.StatusOK, ro.status, id)
		assert.NotEmpty(t, ro.tokens, "%s: the tokens before the pause went out", id)
		assert.Contains(t, last, fmt.Sprintf("a fleet pause stopped this request after %d tokens and it %s", len(ro.tokens), stopped), id)
		assert.Empty(t, ro.finishes, "%s: no abort reached the client", id)
	}
	_, err = r.control.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)

	resp := r.st.post(t, "/inference/v1/generate", generateBody([]uint32{1, 2}, 2, false), http.Header{"X-Coordinator-Continue-On-Pause": {"maybe"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, readAll(t, resp.Body), `x-coordinator-continue-on-pause must be true or false, not \"maybe\"`)
}
