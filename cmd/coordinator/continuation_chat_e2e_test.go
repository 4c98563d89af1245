package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// restChat is one REST chat rollout: its request and what came back, read
// whole (a stream's events joined).
type restChat struct {
	relayedAnswer
}

// chatRead is what a rollout reads of a chat answer or event.
type chatRead struct {
	ID      string `json:"id"`
	Choices []struct {
		Message *struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *restUsage `json:"usage"`
}

// read takes one answer or event in.
func (ro *restChat) read(data string) error {
	ro.raw = append(ro.raw, data)
	if data == "[DONE]" {
		ro.done++
		return nil
	}
	var a chatRead
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return fmt.Errorf("%s: %w: %s", ro.id, err, data)
	}
	ro.ids = append(ro.ids, a.ID)
	for _, c := range a.Choices {
		switch {
		case c.Message != nil:
			ro.text.WriteString(c.Message.Content)
		case c.Delta != nil:
			ro.text.WriteString(c.Delta.Content)
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

// rolloutChat is a rollout's chat: ignore_eos, maxTokens; streamed with the
// usage when stream; extra members appended.
func rolloutChat(content string, maxTokens int, stream bool, extra string) string {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"ignore_eos":true`, sim.DefaultModel, content, maxTokens)
	if stream {
		body += `,"stream":true`
	}
	return body + extra + "}"
}

// postChat sends the rollout with header and reads its answer (on any
// goroutine: it reports, never fails the test).
func (r *rlStack) postChat(ctx context.Context, ro *restChat, header http.Header) {
	ro.status, ro.header, ro.err = r.postRollout(ctx, "/v1/chat/completions", ro.id, ro.body, ro.stream, header, ro.read)
}

// startChats sends the rollouts (each once) and returns a channel of their
// outcomes.
func (r *rlStack) startChats(rollouts []*restChat, header http.Header) <-chan *restChat {
	return sendRollouts(rollouts, func(ctx context.Context, ro *restChat) { r.postChat(ctx, ro, header) })
}

func (ro *restChat) rolloutID() string { return ro.id }

// chatRollouts are n chats (ids prefix-i) of maxTokens, every other one
// streamed with the usage.
func chatRollouts(prefix string, n, maxTokens int) []*restChat {
	out := make([]*restChat, n)
	for i := range out {
		stream := i%2 == 1
		extra := ""
		if stream {
			extra = `,"stream_options":{"include_usage":true}`
		}
		out[i] = &restChat{relayedAnswer{id: fmt.Sprintf("%s-%d", prefix, i), stream: stream, body: rolloutChat(fmt.Sprintf("rollout %d", i), maxTokens, stream, extra)}}
	}
	return out
}

// continuedChatLeg is what the test reads of a continuation's decode leg.
type continuedChatLeg struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ContinueFinalMessage *bool `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	MaxTokens            int   `json:"max_tokens"`
}

// tokensOf is k when text is the chat output's first k tokens, -1 if none.
func tokensOf(text string, limit int) int {
	for k := range limit + 1 {
		if sim.ChatText(k) == text {
			return k
		}
	}
	return -1
}

// TestAChatPauseAbortIsContinued: 16 REST chat rollouts (8 streamed with
// the usage, 8 not) in flight through render and P/D; a pause (abort)
// through the control service ends each on its engine, the coordinator
// holds it, v2 is set, the resume continues it. Each client gets one
// answer: the uninterrupted text, one finish_reason (length), the usage
// of one uninterrupted answer, once; a stream one id and one [DONE]. Each
// rollout's second decode leg is its continuation: a new leg id,
// prefilled again, its body ending with the assistant's text so far to
// continue and the budget left.
func TestAChatPauseAbortIsContinued(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 16, 60
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}, TokenDelay: 50 * time.Millisecond})
	_, err := r.control.ListWorkers(t.Context(), &coordinatorv1.ListWorkersRequest{}) // the fleet's version is known: v1
	require.NoError(t, err)
	out := r.startChats(chatRollouts("chat-cont", rollouts, maxTokens), nil)
	r.pauseAcross(t, rollouts/2, rollouts) // round robin: 8 decode legs on each engine
	got := collectRollouts(t, out, rollouts)

	// The same chats, uninterrupted: the answers to be.
	uninterrupted := collectRollouts(t, r.startChats(chatRollouts("chat-whole", rollouts, maxTokens), nil), rollouts)
	streamed := 0
	for i := range rollouts {
		id := fmt.Sprintf("chat-cont-%d", i)
		ro, whole := got[id], uninterrupted[fmt.Sprintf("chat-whole-%d", i)]
		require.NoError(t, whole.err)
		require.Equal(t, http.StatusOK, whole.status, "%v", whole.raw)
		require.Equal(t, sim.ChatText(maxTokens), whole.text.String(), "not vacuous: the simulator's text")
		assertChatUninterrupted(t, ro, whole)
		if ro.stream {
			streamed++
		}
		assertChatContinuationLegs(t, r, ro)
	}
	assert.Equal(t, rollouts/2, streamed)
}

// assertChatUninterrupted checks a continued chat against the same one
// uninterrupted.
func assertChatUninterrupted(t *testing.T, ro, whole *restChat) {
	t.Helper()
	ro.assertOneAnswer(t, &whole.relayedAnswer)
	if ro.stream {
		assert.Equal(t, 1, strings.Count(strings.Join(ro.raw, "\n"), `"role":"assistant"`), "%s: one assistant message", ro.id)
	}
}

// assertChatContinuationLegs checks a continued chat's legs: two decode
// legs, under two leg ids, each prefilled; the second one's body continues
// the first's text with the budget left.
func assertChatContinuationLegs(t *testing.T, r *rlStack, ro *restChat) {
	t.Helper()
	id := ro.id
	decode := pdLegs(r.sim, id, "decode")
	require.Len(t, decode, 2, "%s: the aborted leg and its continuation", id)
	assert.NotEqual(t, decode[0].Header.Get("X-Request-Id"), decode[1].Header.Get("X-Request-Id"), "%s: a new leg id", id)
	assert.Len(t, pdLegs(r.sim, id, "prefill"), 2, "%s: the continuation is prefilled again", id)
	var next continuedChatLeg
	require.NoError(t, json.Unmarshal(decode[1].Body, &next), id)
	require.Len(t, next.Messages, 2, "%s: the client's message and the assistant's", id)
	last := next.Messages[1]
	assert.Equal(t, "assistant", last.Role, id)
	done := tokensOf(last.Content, 60)
	assert.Positive(t, done, "%s: the text before the pause, whole tokens: %q", id, last.Content)
	assert.Equal(t, 60-done, next.MaxTokens, "%s: the budget left", id)
	require.NotNil(t, next.ContinueFinalMessage, id)
	assert.True(t, *next.ContinueFinalMessage, id)
	require.NotNil(t, next.AddGenerationPrompt, id)
	assert.False(t, *next.AddGenerationPrompt, id)
}

// TestAChatNotContinuableKeepsTheAbort: chats the coordinator cannot
// continue (tools; a stream without a count of its tokens) end at a pause
// (abort) with finish_reason abort and the text so far, as the engine
// answered, never run again.
func TestAChatNotContinuableKeepsTheAbort(t *testing.T) {
	t.Parallel()
	const maxTokens = 400
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Decode: 2}, TokenDelay: 20 * time.Millisecond})
	const tools = `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	rollouts := []*restChat{
		{relayedAnswer{id: "chat-tools-0", body: rolloutChat("a", maxTokens, false, tools)}},
		{relayedAnswer{id: "chat-tools-1", stream: true, body: rolloutChat("b", maxTokens, true, tools+`,"stream_options":{"include_usage":true}`)}},
		{relayedAnswer{id: "chat-uncounted-2", stream: true, body: rolloutChat("c", maxTokens, true, "")}},
		{relayedAnswer{id: "chat-uncounted-3", stream: true, body: rolloutChat("d", maxTokens, true, `,"stream_options":{"include_usage":false}`)}},
	}
	out := r.startChats(rollouts, nil)
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
		if id == "chat-tools-1" {
			assert.Equal(t, 1, ro.usages, "%s: the engine's usage, relayed", id)
			assert.Equal(t, uint32(done), ro.usage.CompletionTokens, id)
		}
		if ro.stream {
			assert.Equal(t, "[DONE]", ro.raw[len(ro.raw)-1], id)
			assert.Contains(t, strings.Join(ro.raw, "\n"), `"delta":{},"logprobs":null,"finish_reason":"abort"}]}`, "%s: the abort as the engine sent it", id)
		}
	}
	_, err = r.control.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
}

// chatVarying matches what differs between two runs of a chat by
// construction: the id (the leg's) and created.
var chatVarying = regexp.MustCompile(`"id":"[^"]*"|"created":\d+`)

// TestAChatNotPausedIsRelayedAsIs: with the continuation on, a chat no
// pause aborted (unary and streamed with the usage) is the very bytes the
// coordinator relays with it off (opted out), but for the leg's id and
// the time.
func TestAChatNotPausedIsRelayedAsIs(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 1, Decode: 1}})
	optOut := http.Header{"X-Coordinator-Continue-On-Pause": {"false"}}
	for _, stream := range []bool{false, true} {
		var answers [2][]string
		for i, h := range []http.Header{nil, optOut} {
			extra := ""
			if stream {
				extra = `,"stream_options":{"include_usage":true}`
			}
			ro := &restChat{relayedAnswer{id: fmt.Sprintf("chat-asis-%t-%d", stream, i), stream: stream, body: rolloutChat("same", 7, stream, extra)}}
			r.postChat(t.Context(), ro, h)
			require.NoError(t, ro.err)
			require.Equal(t, http.StatusOK, ro.status, "%v", ro.raw)
			require.Equal(t, sim.ChatText(7), ro.text.String())
			for _, a := range ro.raw {
				answers[i] = append(answers[i], chatVarying.ReplaceAllString(a, `"-":0`))
			}
		}
		assert.Equal(t, answers[1], answers[0], "stream %t: the worker's answer as relayed without the continuation", stream)
		assert.Contains(t, answers[0][0], `"-":0`, "stream %t: not vacuous", stream)
	}
}
