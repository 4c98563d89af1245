package tokens

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/steps/upstream"
)

// fakeStream records a copy of each message sent: the sink reuses its own.
type fakeStream struct {
	grpc.ServerStream
	sent []*coordinatorv1.GenerateStreamResponse
	err  error
}

func (f *fakeStream) Send(m *coordinatorv1.GenerateStreamResponse) error {
	f.sent = append(f.sent, proto.CloneOf(m))
	return f.err
}

func (f *fakeStream) Context() context.Context { return context.Background() }

func events(data ...string) [][]byte {
	out := make([][]byte, len(data))
	for i, d := range data {
		out[i] = []byte(d)
	}
	return out
}

func TestTokensStreamSink(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f)
	// What a worker streams for n=2, two tokens each, with usage: the
	// events of one token round arrive together.
	require.NoError(t, s.Events(events(
		`{"request_id":"r","choices":[{"index":0,"logprobs":null,"finish_reason":null,"token_ids":[10]}]}`,
		`{"request_id":"r","choices":[{"index":1,"logprobs":null,"finish_reason":null,"token_ids":[20]}]}`,
	), nil))
	require.NoError(t, s.Events(events(
		`{"request_id":"r","choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[11]}]}`,
		`{"request_id":"r","choices":[{"index":1,"logprobs":null,"finish_reason":"stop","token_ids":[4294967295]}]}`,
	), nil))
	require.NoError(t, s.Events(events(
		`{"request_id":"r","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		`[DONE]`,
	), nil))
	require.NoError(t, s.Events(events(`[DONE]`), nil), "nothing to send")

	chunk := func(c *coordinatorv1.TokensChunk) *coordinatorv1.GenerateStreamResponse {
		return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: c}}
	}
	want := []*coordinatorv1.GenerateStreamResponse{
		chunk(&coordinatorv1.TokensChunk{Choices: []*coordinatorv1.TokensChoice{{Index: 0, TokenIds: []uint32{10}}, {Index: 1, TokenIds: []uint32{20}}}}),
		chunk(&coordinatorv1.TokensChunk{Choices: []*coordinatorv1.TokensChoice{
			{Index: 0, TokenIds: []uint32{11}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH},
			{Index: 1, TokenIds: []uint32{1<<32 - 1}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_STOP},
		}}),
		chunk(&coordinatorv1.TokensChunk{Usage: &coordinatorv1.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}}),
	}
	require.Len(t, f.sent, len(want))
	for i := range want {
		assertProto(t, want[i], f.sent[i])
	}
}

func TestTokensStreamSinkMergesOneChoice(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f)
	require.NoError(t, s.Events(events(
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:5","logprob":-0.5,"top_logprobs":[{"token":"token_id:5","logprob":-0.5}]}]},"token_ids":[5]}]}`,
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:6","logprob":-1.5,"top_logprobs":[]}]},"finish_reason":"length","token_ids":[6]}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}}`,
	), nil))
	require.Len(t, f.sent, 1)
	assertProto(t, &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &coordinatorv1.TokensChunk{
		Choices: []*coordinatorv1.TokensChoice{{
			TokenIds:     []uint32{5, 6},
			FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
			Logprobs: []*coordinatorv1.TokenLogprob{
				{TokenId: 5, Logprob: -0.5, TopLogprobs: []*coordinatorv1.TopLogprob{{TokenId: 5, Logprob: -0.5}}},
				{TokenId: 6, Logprob: -1.5},
			},
		}},
		Usage: &coordinatorv1.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CachedTokens: proto.Uint32(1)},
	}}}, f.sent[0])
}

func TestTokensStreamSinkFailures(t *testing.T) {
	t.Parallel()
	t.Run("unreadable event", func(t *testing.T) {
		t.Parallel()
		f := &fakeStream{}
		err := NewStreamSink(f).Events(events(`{"choices":[{"token_ids":["x"]}]}`), nil)
		require.Error(t, err)
		assert.Empty(t, f.sent, "nothing of a bad batch goes out")
		_, isUpstream := errors.AsType[*upstream.StatusError](err)
		assert.False(t, isUpstream)
	})
	t.Run("worker error event", func(t *testing.T) {
		t.Parallel()
		f := &fakeStream{}
		err := NewStreamSink(f).Events(events(`{"error":{"message":"engine dead","code":500}}`), nil)
		se, ok := errors.AsType[*upstream.StatusError](err)
		require.True(t, ok)
		assert.Equal(t, 500, se.StatusCode)
	})
	t.Run("client gone", func(t *testing.T) {
		t.Parallel()
		f := &fakeStream{err: context.Canceled}
		err := NewStreamSink(f).Events(events(`{"choices":[{"index":0,"token_ids":[1]}]}`), nil)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestTokensStreamSinkWholeAnswer(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f)
	require.NoError(t, s.Response(200, "application/json",
		[]byte(`{"choices":[{"index":0,"token_ids":[1,2],"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)))
	require.Len(t, f.sent, 1)
	assertProto(t, &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &coordinatorv1.TokensChunk{
		Choices: []*coordinatorv1.TokensChoice{{TokenIds: []uint32{1, 2}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH}},
		Usage:   &coordinatorv1.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3},
	}}}, f.sent[0])
	assert.Error(t, s.Response(200, "application/json", []byte(`nope`)))
}

func TestTokensUnarySink(t *testing.T) {
	t.Parallel()
	s := NewUnarySink(&coordinatorv1.TokensRequest{TokenIds: []uint32{1, 2}})
	assert.ErrorIs(t, s.Events(events(`{}`), nil), errStreamedAnswer)
	require.NoError(t, s.Response(200, "application/json",
		[]byte(`{"choices":[{"index":0,"token_ids":[3],"finish_reason":"stop"}],"prompt_logprobs":[null,{"2":{"logprob":-1}}]}`)))
	assertProto(t, &coordinatorv1.TokensResponse{
		Choices:        []*coordinatorv1.TokensChoice{{TokenIds: []uint32{3}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_STOP}},
		PromptLogprobs: []*coordinatorv1.PromptLogprob{{TokenId: 1}, {TokenId: 2, Logprob: proto.Float32(-1), TopLogprobs: []*coordinatorv1.TopLogprob{{TokenId: 2, Logprob: -1}}}},
	}, s.resp)
	assert.Error(t, s.Response(200, "application/json", []byte(`{"choices":[{"token_ids":{}}]}`)))
}
