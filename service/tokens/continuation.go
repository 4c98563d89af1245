package tokens

import (
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// Continuation carries a tokens request across the aborts of fleet
// pauses: it keeps what the client has been given so far, so that the
// request can run again with that output as more prompt and what remains
// of its budget, and makes the runs' answers read as one. Whether an abort
// is continued is the service's decision; the rest is here.
//
// Only a request of one choice is continued (Continuable): its output is
// one sequence.
type Continuation struct {
	in *coordinatorv1.TokensRequest
	// cont is asked when a run ends with an abort: true holds the abort
	// back (the run's answer goes on in the next one).
	cont func() bool
	// output is every token of the answer so far; base is where the
	// current run's begin in it.
	output []uint32
	base   int
	// spans are the weight versions of output before base.
	spans []*coordinatorv1.WeightVersionSpan
	// first is the first run's usage (its prompt is the client's).
	first *coordinatorv1.Usage
	// aborted: the current run ended with an abort held back.
	aborted bool
	// answer is a unary call's answer so far.
	answer *coordinatorv1.TokensResponse
}

// Continuable reports whether in can be continued: one choice.
func Continuable(in *coordinatorv1.TokensRequest) bool { return in.GetSampling().GetN() <= 1 }

// NewContinuation starts carrying in; cont decides each abort.
func NewContinuation(in *coordinatorv1.TokensRequest, cont func() bool) *Continuation {
	return &Continuation{in: in, cont: cont}
}

// Aborted reports whether the last run ended with an abort held back: the
// request is to run again (Next) once the fleet resumes.
func (c *Continuation) Aborted() bool { return c.aborted }

// Generated is how many tokens the answer has so far.
func (c *Continuation) Generated() int { return len(c.output) }

// Next is the request that continues the answer: the client's prompt and
// the output so far as its token IDs, max_tokens and min_tokens less the
// output, no prompt_logprobs (the first run's answer has them), the rest
// as the client sent it. It starts a new run.
func (c *Continuation) Next() *coordinatorv1.TokensRequest {
	next := proto.CloneOf(c.in)
	next.TokenIds = append(slices.Clip(c.in.GetTokenIds()), c.output...)
	if next.Sampling == nil {
		next.Sampling = &coordinatorv1.SamplingParams{}
	}
	s, done := next.Sampling, uint32(len(c.output))
	if s.MaxTokens != nil {
		s.MaxTokens = proto.Uint32(max(s.GetMaxTokens()-min(done, s.GetMaxTokens()), 1))
	}
	if s.MinTokens != nil {
		s.MinTokens = proto.Uint32(s.GetMinTokens() - min(done, s.GetMinTokens()))
	}
	s.PromptLogprobs = nil
	c.base, c.aborted = len(c.output), false
	return next
}

// choice takes a run's choice in: its tokens join the output; an abort
// the service continues loses its finish reason and weight versions
// (kept for the end); a later run's weight versions become the whole
// output's. It reports whether anything is left to send of it.
func (c *Continuation) choice(ch *coordinatorv1.TokensChoice) bool {
	c.output = append(c.output, ch.GetTokenIds()...)
	if ch.GetFinishReason() == coordinatorv1.FinishReason_FINISH_REASON_ABORT && c.cont() {
		c.aborted = true
		c.spans = joinSpans(c.spans, ch.GetWeightVersions(), c.base)
		ch.FinishReason, ch.WeightVersions = coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED, nil
		return len(ch.GetTokenIds()) > 0
	}
	if c.base > 0 && (len(ch.GetWeightVersions()) > 0 || ch.GetFinishReason() != coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED) {
		ch.WeightVersions = joinSpans(slices.Clone(c.spans), ch.GetWeightVersions(), c.base)
	}
	return true
}

// usage takes a run's usage in and returns the one to send, nil for none:
// held back after an abort continued; after a continuation, the whole
// answer's (the client's prompt, every output token).
func (c *Continuation) usage(u *coordinatorv1.Usage) *coordinatorv1.Usage {
	if u == nil {
		return nil
	}
	if c.first == nil {
		c.first = proto.CloneOf(u)
	}
	if c.aborted {
		return nil
	}
	if c.base == 0 {
		return u
	}
	u.PromptTokens, u.CachedTokens = c.first.GetPromptTokens(), c.first.CachedTokens
	u.CompletionTokens = uint32(c.base) + u.GetCompletionTokens()
	u.TotalTokens = u.GetPromptTokens() + u.GetCompletionTokens()
	return u
}

// joinSpans appends the spans of a run whose output began at base to
// those before it, merging a span that goes on with the same version.
func joinSpans(to, run []*coordinatorv1.WeightVersionSpan, base int) []*coordinatorv1.WeightVersionSpan {
	for _, sp := range run {
		start := uint32(base) + sp.GetStart()
		if n := len(to); n > 0 && to[n-1].GetVersion() == sp.GetVersion() && to[n-1].GetStart()+to[n-1].GetCount() == start {
			to[n-1] = &coordinatorv1.WeightVersionSpan{Version: sp.GetVersion(), Start: to[n-1].GetStart(), Count: to[n-1].GetCount() + sp.GetCount()}
			continue
		}
		to = append(to, &coordinatorv1.WeightVersionSpan{Version: sp.GetVersion(), Start: start, Count: sp.GetCount()})
	}
	return to
}

// Answer takes a unary run's answer in: the first is the answer, a later
// one's tokens, logprobs, finish reason, weight versions and usage join it.
func (c *Continuation) Answer(resp *coordinatorv1.TokensResponse) {
	for _, ch := range resp.GetChoices() {
		c.choice(ch)
	}
	u := c.usage(resp.GetUsage())
	if c.answer == nil {
		c.answer = resp
		return
	}
	for _, ch := range resp.GetChoices() {
		into := c.answer.GetChoices()[0]
		into.TokenIds = append(into.TokenIds, ch.GetTokenIds()...)
		into.Logprobs = append(into.Logprobs, ch.GetLogprobs()...)
		into.FinishReason = ch.GetFinishReason()
		into.WeightVersions = ch.GetWeightVersions()
	}
	if u != nil {
		c.answer.Usage = u
	}
}

// Result is the unary answer of every run, one answer.
func (c *Continuation) Result() *coordinatorv1.TokensResponse { return c.answer }

// chunk adapts a streamed run's chunk before it is sent and reports
// whether anything is left to send.
func (c *Continuation) chunk(m *coordinatorv1.TokensChunk) bool {
	kept := m.Choices[:0]
	for _, ch := range m.GetChoices() {
		if c.choice(ch) {
			kept = append(kept, ch)
		}
	}
	m.Choices, m.Usage = kept, c.usage(m.GetUsage())
	return len(m.Choices) > 0 || m.Usage != nil
}

// Stream is stream with every chunk adapted as the runs go on.
func (c *Continuation) Stream(stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse] {
	return continuedStream{ServerStreamingServer: stream, c: c}
}

// continuedStream sends a stream's chunks as the Continuation adapts them.
type continuedStream struct {
	grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
	c *Continuation
}

func (s continuedStream) Send(m *coordinatorv1.GenerateStreamResponse) error {
	if t := m.GetTokens(); t != nil && !s.c.chunk(t) {
		return nil
	}
	return s.ServerStreamingServer.Send(m)
}
