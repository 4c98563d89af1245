package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// continued is one tokens rollout's answer, read whole: its choice, the
// weight versions, the usage and how many usages came.
type continued struct {
	id     string
	prompt []uint32
	view   choiceView
	spans  []spanView
	usage  *coordinatorv1.Usage
	usages int
	err    error
}

// tokensRequest is a rollout's request: ignore_eos, maxTokens, logprobs 1.
func tokensRequest(prompt []uint32, maxTokens uint32) *coordinatorv1.TokensRequest {
	return &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: prompt,
		Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(maxTokens), IgnoreEos: true, Logprobs: proto.Uint32(1)}}
}

// receiveAll reads a stream to its end, sending on started after the
// first chunk.
func (ro *continued) receiveAll(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse], started chan<- string) error {
	var views []choiceView
	defer func() {
		if len(views) == 1 {
			ro.view = views[0]
		}
	}()
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if first {
			started <- ro.id
		}
		chunk := msg.GetTokens()
		if views, err = viewOf(chunk.GetChoices(), views, true); err != nil {
			return err
		}
		for _, c := range chunk.GetChoices() {
			if len(c.GetWeightVersions()) > 0 {
				ro.spans = spansOf(c)
			}
		}
		if chunk.GetUsage() != nil {
			ro.usage, ro.usages = chunk.GetUsage(), ro.usages+1
		}
	}
}

// streamRollouts streams n rollouts (ids prefix-i) with the call metadata
// md, sending each id on started once its first tokens came.
func (r *rlStack) streamRollouts(prefix string, n int, maxTokens uint32, md metadata.MD, started chan<- string) <-chan continued {
	out := make(chan continued, n)
	for i := range n {
		go func() {
			ro := continued{id: fmt.Sprintf("%s-%d", prefix, i), prompt: []uint32{uint32(300 + i), 11, 12}}
			ctx := metadata.NewOutgoingContext(context.Background(), md)
			stream, err := r.gen.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: ro.id,
				Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tokensRequest(ro.prompt, maxTokens)}})
			if err == nil {
				err = ro.receiveAll(stream, started)
			}
			ro.err = err
			out <- ro
		}()
	}
	return out
}

// waitStarted reads n ids from started.
func waitStarted(t *testing.T, started <-chan string, n int) {
	t.Helper()
	for range n {
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the rollouts did not all start")
		}
	}
}

// assertUninterrupted checks a continued rollout against the simulator's
// uninterrupted answer: every token once and in order, each logprob the
// token's, usage as one answer's, weight versions v1 then v2 covering the
// output.
func assertUninterrupted(t *testing.T, ro continued, maxTokens int) {
	t.Helper()
	id := ro.id
	require.NoError(t, ro.err, id)
	want := sim.CompletionTokens(ro.prompt, maxTokens, 0)
	assert.Equal(t, want, ro.view.IDs, "%s: every token once, in order", id)
	assert.Equal(t, want, ro.view.LogprobIDs, "%s: a logprob per token", id)
	for i, lp := range ro.view.Logprobs {
		if !assert.Equal(t, sim.TokenLogprob(ro.prompt, 0, i), lp, "%s: logprob %d is the uninterrupted one", id, i) {
			break
		}
	}
	assert.Equal(t, coordinatorv1.FinishReason_FINISH_REASON_LENGTH, ro.view.Finish, id)
	assert.LessOrEqual(t, ro.usages, 1, "%s: usage sent once", id)
	assert.Equal(t, uint32(len(ro.prompt)), ro.usage.GetPromptTokens(), "%s: the client's prompt", id)
	assert.Equal(t, uint32(maxTokens), ro.usage.GetCompletionTokens(), id)
	assert.Equal(t, uint32(len(ro.prompt)+maxTokens), ro.usage.GetTotalTokens(), id)
	require.Len(t, ro.spans, 2, "%s: v1 before the pause, v2 after it: %v", id, ro.spans)
	assert.Equal(t, spanView{Version: "v1", Start: 0, Count: ro.spans[0].Count}, ro.spans[0], id)
	assert.Equal(t, spanView{Version: "v2", Start: ro.spans[0].Count, Count: uint32(maxTokens) - ro.spans[0].Count}, ro.spans[1], id)
}

// TestAPauseAbortIsContinued: 64 streamed gRPC rollouts in flight over
// P/D; a pause (abort) through the control service ends each on its
// engine, the coordinator holds it, v2 is set, the resume continues it. The
// client sees one answer each: the uninterrupted token sequence, logprobs
// and usage, the versions changing where the pause fell; each rollout's
// second decode leg is its continuation, prefilled again.
func TestAPauseAbortIsContinued(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 64, 60
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}, TokenDelay: 50 * time.Millisecond})
	ctx := t.Context()
	started := make(chan string, rollouts)
	inFlight := r.streamRollouts("cont", rollouts, maxTokens, nil, started)
	waitStarted(t, started, rollouts)

	_, err := r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
		return err == nil && l.GetHeldRequests() == rollouts
	}, time.Minute, 5*time.Millisecond, "every aborted rollout waits for the resume")
	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2"})
	require.NoError(t, err)
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)

	for id, ro := range collectRollouts(t, inFlight, rollouts) {
		assertUninterrupted(t, ro, maxTokens)
		decode := pdLegs(r.sim, id, "decode")
		require.Len(t, decode, 2, "%s: the aborted leg and its continuation", id)
		assert.NotEqual(t, decode[0].Header.Get("X-Request-Id"), decode[1].Header.Get("X-Request-Id"), "%s: a new leg id", id)
		assert.Len(t, pdLegs(r.sim, id, "prefill"), 2, "%s: the continuation is prefilled again", id)
	}
	assert.Equal(t, fmt.Sprint(rollouts), r.st.scrape(t, `coordinator_continuations_total{outcome="resumed"}`))
}

func (ro continued) rolloutID() string { return ro.id }

// TestPauseAbortEndsTheRolloutsThatOptedOut: a rollout that opted out of
// the continuation (x-coordinator-continue-on-pause: false) ends at a
// pause (abort) with finish_reason abort and the tokens generated so far,
// as the engine answered; a value other than true or false is refused.
func TestPauseAbortEndsTheRolloutsThatOptedOut(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 8, 400
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Decode: 2}, TokenDelay: 20 * time.Millisecond})
	ctx := t.Context()
	started := make(chan string, rollouts)
	inFlight := r.streamRollouts("abort", rollouts, maxTokens, metadata.Pairs("x-coordinator-continue-on-pause", "FALSE"), started)
	waitStarted(t, started, rollouts)
	_, err := r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	for id, ro := range collectRollouts(t, inFlight, rollouts) {
		require.NoError(t, ro.err, id)
		assert.Equal(t, coordinatorv1.FinishReason_FINISH_REASON_ABORT, ro.view.Finish, id)
		require.NotEmpty(t, ro.view.IDs, id)
		assert.Less(t, len(ro.view.IDs), maxTokens, id)
		assert.Equal(t, sim.CompletionTokens(ro.prompt, maxTokens, 0)[:len(ro.view.IDs)], ro.view.IDs, "%s: the partial tokens", id)
		assert.Len(t, pdLegs(r.sim, id, "decode"), 1, "%s: not continued", id)
	}
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)

	bad := metadata.NewOutgoingContext(ctx, metadata.Pairs("x-coordinator-continue-on-pause", "maybe"))
	_, err = r.gen.Generate(bad, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: tokensRequest([]uint32{1, 2}, 2)}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, `x-coordinator-continue-on-pause must be true or false, not "maybe"`)
}

// TestAUnaryRolloutIsContinued: Generate (one answer) across a pause
// (abort): the answer is the uninterrupted one, its versions v1 then v2.
func TestAUnaryRolloutIsContinued(t *testing.T) {
	t.Parallel()
	const rollouts, maxTokens = 4, 60
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Decode: 2}, TokenDelay: 20 * time.Millisecond})
	ctx := t.Context()
	_, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{}) // the fleet's version: v1
	require.NoError(t, err)
	out := make(chan continued, rollouts)
	for i := range rollouts {
		go func() {
			ro := continued{id: fmt.Sprintf("unary-%d", i), prompt: []uint32{uint32(500 + i), 11, 12}}
			var md metadata.MD
			resp, err := r.gen.Generate(context.Background(), &coordinatorv1.GenerateRequest{RequestId: ro.id,
				Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: tokensRequest(ro.prompt, maxTokens)}}, grpc.Header(&md))
			ro.err = err
			if err == nil {
				var views []choiceView
				views, ro.err = viewOf(resp.GetTokens().GetChoices(), nil, false)
				if len(views) == 1 {
					ro.view, ro.spans = views[0], spansOf(resp.GetTokens().GetChoices()[0])
				}
				ro.usage, ro.usages = resp.GetTokens().GetUsage(), 1
			}
			if ro.err == nil && !slices.Equal(md.Get("x-weight-version"), []string{"v1,v2"}) {
				ro.err = fmt.Errorf("one x-weight-version header naming both versions, got %q", md.Get("x-weight-version"))
			}
			out <- ro
		}()
	}
	for _, e := range r.engines("decode") { // each has v1 tokens
		require.NoError(t, e.WaitStarted(waitCtx(t), rollouts/2, 3))
	}
	_, err = r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
		return err == nil && l.GetHeldRequests() == rollouts
	}, time.Minute, 5*time.Millisecond)
	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2"})
	require.NoError(t, err)
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
	for _, ro := range collectRollouts(t, out, rollouts) {
		assertUninterrupted(t, ro, maxTokens)
	}
}

// TestAContinuationWaitIsBoundedAndCancellable: a rollout waiting for the
// resume whose client leaves frees its place at once (goleak checks the
// package's goroutines at its end); one whose resume never comes ends at
// control.hold.max_wait with UNAVAILABLE saying what became of it.
func TestAContinuationWaitIsBoundedAndCancellable(t *testing.T) {
	t.Parallel()
	r := startRLStackHolding(t, sim.Options{Engines: sim.EngineCounts{Decode: 1}, TokenDelay: 20 * time.Millisecond}, "2s")
	ctx := t.Context()
	leaving, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		tokens int
		err    error
	}
	outs := make(chan outcome, 2)
	started := make(chan struct{}, 2)
	for _, c := range []context.Context{leaving, context.Background()} {
		go func() {
			stream, err := r.gen.GenerateStream(c, &coordinatorv1.GenerateStreamRequest{
				Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tokensRequest([]uint32{9, 9}, 400)}})
			n := 0
			for err == nil {
				var msg *coordinatorv1.GenerateStreamResponse
				if msg, err = stream.Recv(); err == nil {
					if n == 0 {
						started <- struct{}{}
					}
					n += len(msg.GetTokens().GetChoices()[0].GetTokenIds())
				}
			}
			outs <- outcome{n, err}
		}()
	}
	<-started
	<-started
	_, err := r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "abort"})
	require.NoError(t, err)
	held := func(n uint32) func() bool {
		return func() bool {
			l, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
			return err == nil && l.GetHeldRequests() == n
		}
	}
	require.Eventually(t, held(2), time.Minute, 5*time.Millisecond)
	cancel()
	require.Eventually(t, held(1), time.Minute, 5*time.Millisecond, "the client that left has no place in the hold")
	for range 2 {
		o := <-outs
		if status.Code(o.err) == codes.Canceled {
			continue
		}
		assert.Equal(t, codes.Unavailable, status.Code(o.err), "%v", o.err)
		assert.ErrorContains(t, o.err, fmt.Sprintf("a fleet pause stopped this request after %d tokens and it could not be continued: the inference fleet is paused for a weight update and did not resume within control.hold.max_wait (2s)", o.tokens))
	}
	decode := 0
	for _, l := range r.sim.Legs() {
		if l.Profile == "decode" {
			decode++
		}
	}
	assert.Equal(t, 2, decode, "no continuation ran")
	assert.Equal(t, "1", r.st.scrape(t, `coordinator_continuations_total{outcome="gone"}`))
	assert.Equal(t, "1", r.st.scrape(t, `coordinator_continuations_total{outcome="timeout"}`))
	assert.Equal(t, "0", r.st.scrape(t, `coordinator_continuations_total{outcome="resumed"}`))
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
}
