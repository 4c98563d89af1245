package tokens

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

func span(v string, start, count uint32) *coordinatorv1.WeightVersionSpan {
	return &coordinatorv1.WeightVersionSpan{Version: v, Start: start, Count: count}
}

// TestContinuationNext: the next run's request is the prompt and the
// output so far, with the budget left and no prompt logprobs; the client's
// request is left as it was.
func TestContinuationNext(t *testing.T) {
	t.Parallel()
	in := &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1, 2}, CacheSalt: "salt",
		Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(10), MinTokens: proto.Uint32(2), PromptLogprobs: proto.Uint32(1), Temperature: proto.Float32(0.7)}}
	c := NewContinuation(in, func() bool { return true })
	resp := &coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{7, 8, 9},
		FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT, WeightVersions: []*coordinatorv1.WeightVersionSpan{span("v1", 0, 3)}}},
		Usage: &coordinatorv1.Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5}}
	c.Answer(resp)
	require.True(t, c.Aborted())
	next := c.Next()
	assert.Equal(t, []uint32{1, 2, 7, 8, 9}, next.GetTokenIds())
	assert.Equal(t, uint32(7), next.GetSampling().GetMaxTokens())
	assert.Equal(t, uint32(0), next.GetSampling().GetMinTokens())
	assert.Nil(t, next.GetSampling().PromptLogprobs)
	assert.Equal(t, float32(0.7), next.GetSampling().GetTemperature())
	assert.Equal(t, "salt", next.GetCacheSalt())
	assert.Equal(t, []uint32{1, 2}, in.GetTokenIds(), "the client's request unchanged")
	assert.Equal(t, uint32(10), in.GetSampling().GetMaxTokens())
	assert.False(t, c.Aborted(), "a new run")
}

// TestContinuationAnswer: two unary runs read as one answer; the abort is
// gone, the spans are the whole output's, the usage one answer's.
func TestContinuationAnswer(t *testing.T) {
	t.Parallel()
	c := NewContinuation(&coordinatorv1.TokensRequest{TokenIds: []uint32{1}}, func() bool { return true })
	c.Answer(&coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{5, 6},
		Logprobs:     []*coordinatorv1.TokenLogprob{{TokenId: 5}, {TokenId: 6}},
		FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT, WeightVersions: []*coordinatorv1.WeightVersionSpan{span("v1", 0, 2)}}},
		Usage: &coordinatorv1.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CachedTokens: proto.Uint32(1)}})
	c.Next()
	c.Answer(&coordinatorv1.TokensResponse{Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{7},
		Logprobs:     []*coordinatorv1.TokenLogprob{{TokenId: 7}},
		FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH, WeightVersions: []*coordinatorv1.WeightVersionSpan{span("v2", 0, 1)}}},
		Usage: &coordinatorv1.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}})
	got := c.Result()
	require.Len(t, got.GetChoices(), 1)
	ch := got.GetChoices()[0]
	assert.Equal(t, []uint32{5, 6, 7}, ch.GetTokenIds())
	assert.Len(t, ch.GetLogprobs(), 3)
	assert.Equal(t, coordinatorv1.FinishReason_FINISH_REASON_LENGTH, ch.GetFinishReason())
	assert.True(t, proto.Equal(span("v1", 0, 2), ch.GetWeightVersions()[0]))
	assert.True(t, proto.Equal(span("v2", 2, 1), ch.GetWeightVersions()[1]))
	assert.Equal(t, uint32(1), got.GetUsage().GetPromptTokens(), "the client's prompt")
	assert.Equal(t, uint32(3), got.GetUsage().GetCompletionTokens())
	assert.Equal(t, uint32(4), got.GetUsage().GetTotalTokens())
	assert.Equal(t, uint32(1), got.GetUsage().GetCachedTokens())
}

// TestContinuationStream: over a stream, the abort's finish reason,
// spans and usage are held back; the last run's final chunk names the
// whole output's versions (one span when the version did not change) and
// its usage is one answer's. An abort the service does not continue goes
// through as the worker sent it.
func TestContinuationStream(t *testing.T) {
	t.Parallel()
	fs := &fakeStream{}
	c := NewContinuation(&coordinatorv1.TokensRequest{TokenIds: []uint32{1, 2}}, func() bool { return true })
	stream := c.Stream(fs)
	send := func(ch *coordinatorv1.TokensChoice, u *coordinatorv1.Usage) {
		var chunk coordinatorv1.TokensChunk
		if ch != nil {
			chunk.Choices = []*coordinatorv1.TokensChoice{ch}
		}
		chunk.Usage = u
		require.NoError(t, stream.Send(&coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &chunk}}))
	}
	send(&coordinatorv1.TokensChoice{TokenIds: []uint32{5}}, nil)
	send(&coordinatorv1.TokensChoice{FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT,
		WeightVersions: []*coordinatorv1.WeightVersionSpan{span("v1", 0, 1)}}, &coordinatorv1.Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3})
	require.Len(t, fs.sent, 1, "the abort chunk had nothing else to send")
	next := c.Next()
	assert.Equal(t, []uint32{1, 2, 5}, next.GetTokenIds())
	send(&coordinatorv1.TokensChoice{TokenIds: []uint32{6, 7}}, nil)
	send(&coordinatorv1.TokensChoice{FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
		WeightVersions: []*coordinatorv1.WeightVersionSpan{span("v1", 0, 2)}}, &coordinatorv1.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5})
	require.Len(t, fs.sent, 3)
	last := fs.sent[2].GetTokens()
	require.Len(t, last.GetChoices()[0].GetWeightVersions(), 1)
	assert.True(t, proto.Equal(span("v1", 0, 3), last.GetChoices()[0].GetWeightVersions()[0]), "one version, one span")
	assert.Equal(t, uint32(2), last.GetUsage().GetPromptTokens())
	assert.Equal(t, uint32(3), last.GetUsage().GetCompletionTokens())

	kept := &fakeStream{}
	off := NewContinuation(&coordinatorv1.TokensRequest{TokenIds: []uint32{1}}, func() bool { return false })
	abort := &coordinatorv1.TokensChunk{Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{5}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_ABORT}},
		Usage: &coordinatorv1.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}
	require.NoError(t, off.Stream(kept).Send(&coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: abort}}))
	require.Len(t, kept.sent, 1)
	assert.Equal(t, coordinatorv1.FinishReason_FINISH_REASON_ABORT, kept.sent[0].GetTokens().GetChoices()[0].GetFinishReason())
	assert.False(t, off.Aborted())
}

// BenchmarkContinuationChunk is what a continued stream adds to each
// chunk sent while no pause aborts it: the output kept, nothing else.
func BenchmarkContinuationChunk(b *testing.B) {
	fs := &discardStream{}
	c := NewContinuation(&coordinatorv1.TokensRequest{TokenIds: []uint32{1, 2}}, func() bool { return false })
	stream := c.Stream(fs)
	choice := &coordinatorv1.TokensChoice{TokenIds: []uint32{42}, Logprobs: []*coordinatorv1.TokenLogprob{{TokenId: 42, Logprob: -0.5}}}
	chunk := &coordinatorv1.TokensChunk{}
	msg := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: chunk}}
	b.ReportAllocs()
	for b.Loop() {
		chunk.Choices = append(chunk.Choices[:0], choice)
		if err := stream.Send(msg); err != nil {
			b.Fatal(err)
		}
	}
}
