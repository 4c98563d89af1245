package tokens

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
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
	s := NewStreamSink(f, nil)
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
	s := NewStreamSink(f, nil)
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
		err := NewStreamSink(f, nil).Events(events(`{"choices":[{"token_ids":["x"]}]}`), nil)
		require.Error(t, err)
		assert.Empty(t, f.sent, "nothing of a bad batch goes out")
		_, isUpstream := errors.AsType[*gateway.StatusError](err)
		assert.False(t, isUpstream)
	})
	t.Run("worker error event", func(t *testing.T) {
		t.Parallel()
		f := &fakeStream{}
		err := NewStreamSink(f, nil).Events(events(`{"error":{"message":"engine dead","code":500}}`), nil)
		se, ok := errors.AsType[*gateway.StatusError](err)
		require.True(t, ok)
		assert.Equal(t, 500, se.StatusCode)
	})
	t.Run("client gone", func(t *testing.T) {
		t.Parallel()
		f := &fakeStream{err: context.Canceled}
		err := NewStreamSink(f, nil).Events(events(`{"choices":[{"index":0,"token_ids":[1]}]}`), nil)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestTokensStreamSinkWholeAnswer(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f, nil)
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
	s := NewUnarySink(&coordinatorv1.TokensRequest{TokenIds: []uint32{1, 2}}, nil)
	assert.ErrorIs(t, s.Events(events(`{}`), nil), errStreamedAnswer)
	require.NoError(t, s.Response(200, "application/json",
		[]byte(`{"choices":[{"index":0,"token_ids":[3],"finish_reason":"stop"}],"prompt_logprobs":[null,{"2":{"logprob":-1}}]}`)))
	assertProto(t, &coordinatorv1.TokensResponse{
		Choices:        []*coordinatorv1.TokensChoice{{TokenIds: []uint32{3}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_STOP}},
		PromptLogprobs: []*coordinatorv1.PromptLogprob{{TokenId: 1}, {TokenId: 2, Logprob: proto.Float32(-1), TopLogprobs: []*coordinatorv1.TopLogprob{{TokenId: 2, Logprob: -1}}}},
	}, s.resp)
	assert.Error(t, s.Response(200, "application/json", []byte(`{"choices":[{"token_ids":{}}]}`)))
}

// TestTokensStreamSinkReusesOnlyWhatIsSent streams batches of events of
// changing shapes (choices, tokens, top logprobs) through one sink: each
// message sent holds its own batch's tokens and logprobs, whatever the
// storage reused from the events and messages before it held.
func TestTokensStreamSinkReusesOnlyWhatIsSent(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f, nil)
	var want []*coordinatorv1.GenerateStreamResponse
	id := uint32(100)
	for b := range 24 {
		var batch []string
		chunk := &coordinatorv1.TokensChunk{}
		byIndex := map[uint32]*coordinatorv1.TokensChoice{}
		withLogprobs := b%5 != 0
		for e := range 1 + (b*7)%5 {
			var choices []string
			for k := range 1 + (b+e)%2 {
				index := uint32((b + e + 2*k) % 3)
				c := byIndex[index]
				if c == nil {
					c = &coordinatorv1.TokensChoice{Index: index}
					byIndex[index] = c
					chunk.Choices = append(chunk.Choices, c)
				}
				var ids, content []string
				for range 1 + (b*e+k)%3 {
					id++
					ids = append(ids, fmt.Sprint(id))
					c.TokenIds = append(c.TokenIds, id)
					if !withLogprobs {
						continue
					}
					lp := &coordinatorv1.TokenLogprob{TokenId: id, Logprob: -float32(id%7) - 0.5}
					var tops []string
					for n := range (b + 2*e + int(id)) % 4 {
						top := &coordinatorv1.TopLogprob{TokenId: id + uint32(n)*1000, Logprob: -float32(n) - 0.25}
						lp.TopLogprobs = append(lp.TopLogprobs, top)
						tops = append(tops, fmt.Sprintf(`{"token":"token_id:%d","logprob":%g,"bytes":null}`, top.TokenId, top.Logprob))
					}
					content = append(content, fmt.Sprintf(`{"token":"token_id:%d","logprob":%g,"top_logprobs":[%s]}`,
						id, lp.Logprob, strings.Join(tops, ",")))
					c.Logprobs = append(c.Logprobs, lp)
				}
				logprobs := "null"
				if withLogprobs {
					logprobs = `{"content":[` + strings.Join(content, ",") + `]}`
				}
				choices = append(choices, fmt.Sprintf(`{"index":%d,"logprobs":%s,"finish_reason":null,"token_ids":[%s]}`,
					index, logprobs, strings.Join(ids, ",")))
			}
			batch = append(batch, `{"request_id":"r","choices":[`+strings.Join(choices, ",")+`]}`)
		}
		require.NoError(t, s.Events(events(batch...), nil), "batch %d", b)
		want = append(want, &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: chunk}})
	}
	require.Len(t, f.sent, len(want))
	for i := range want {
		assertProto(t, want[i], f.sent[i])
	}
}

// discardStream takes each message without keeping it.
type discardStream struct{ fakeStream }

func (*discardStream) Send(*coordinatorv1.GenerateStreamResponse) error { return nil }

// TestTokensStreamSinkAllocs: once its storage has grown, a stream sink
// allocates nothing for a batch of the usual events (a rollout's n=4
// samples, one token each, with logprobs). Not parallel: AllocsPerRun
// counts the whole process's allocations.
func TestTokensStreamSinkAllocs(t *testing.T) {
	s := NewStreamSink(&discardStream{}, nil)
	var batch [][]byte
	for i := range 4 {
		batch = append(batch, []byte(fmt.Sprintf(`{"request_id":"generate-tokens-0b8f2c6e","choices":[{"index":%d,"logprobs":`+
			`{"content":[{"token":"token_id:151643","logprob":-0.123,"bytes":null,"top_logprobs":[{"token":"token_id:151643","logprob":-0.123,"bytes":null}]}]},`+
			`"finish_reason":null,"token_ids":[151643],"routed_experts":null}]}`, i)))
	}
	for range 3 {
		require.NoError(t, s.Events(batch, nil))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.Events(batch, nil); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "allocations per batch of %d events", len(batch))
}

// TestTokensStreamSinkWeightVersions: a choice's weight versions come with
// its last event and cover its tokens of every chunk; a choice message
// reused for another choice carries none of them.
func TestTokensStreamSinkWeightVersions(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	s := NewStreamSink(f, nil)
	require.NoError(t, s.Events(events(
		`{"choices":[{"index":0,"logprobs":null,"finish_reason":null,"token_ids":[10]}]}`,
		`{"choices":[{"index":1,"logprobs":null,"finish_reason":null,"token_ids":[20]}]}`,
	), nil))
	require.NoError(t, s.Events(events(
		`{"choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[11],`+
			`"weight_versions":[{"version":"v1","start":0,"end":1},{"version":"v2","start":1,"end":2}]}]}`,
		`{"choices":[{"index":1,"logprobs":null,"finish_reason":null,"token_ids":[21]}]}`,
	), nil))
	require.NoError(t, s.Events(events(
		`{"choices":[{"index":1,"logprobs":null,"finish_reason":null,"token_ids":[22]}]}`,
	), nil))
	require.NoError(t, s.Events(events(
		`{"choices":[{"index":1,"logprobs":null,"finish_reason":"stop","token_ids":[],"weight_versions":[{"version":"v2","start":0,"end":3}]}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":5,"total_tokens":6}}`,
	), nil))

	chunk := func(choices ...*coordinatorv1.TokensChoice) *coordinatorv1.GenerateStreamResponse {
		return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &coordinatorv1.TokensChunk{Choices: choices}}}
	}
	last := chunk(&coordinatorv1.TokensChoice{Index: 1, TokenIds: []uint32{}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_STOP,
		WeightVersions: []*coordinatorv1.WeightVersionSpan{{Version: "v2", Count: 3}}})
	last.GetTokens().Usage = &coordinatorv1.Usage{PromptTokens: 1, CompletionTokens: 5, TotalTokens: 6}
	want := []*coordinatorv1.GenerateStreamResponse{
		chunk(&coordinatorv1.TokensChoice{Index: 0, TokenIds: []uint32{10}}, &coordinatorv1.TokensChoice{Index: 1, TokenIds: []uint32{20}}),
		chunk(&coordinatorv1.TokensChoice{Index: 0, TokenIds: []uint32{11}, FinishReason: coordinatorv1.FinishReason_FINISH_REASON_LENGTH,
			WeightVersions: []*coordinatorv1.WeightVersionSpan{{Version: "v1", Count: 1}, {Version: "v2", Start: 1, Count: 1}}},
			&coordinatorv1.TokensChoice{Index: 1, TokenIds: []uint32{21}}),
		chunk(&coordinatorv1.TokensChoice{Index: 1, TokenIds: []uint32{22}}),
		last,
	}
	require.Len(t, f.sent, len(want))
	for i := range want {
		assertProto(t, want[i], f.sent[i])
	}
}

func TestTokensStreamSinkWeightVersionsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		events []string
		err    string
	}{
		{
			name: "more spans than the choice's tokens over the stream",
			events: []string{
				`{"choices":[{"index":0,"token_ids":[1]},{"index":1,"token_ids":[5,6,7]}]}`,
				`{"choices":[{"index":0,"token_ids":[2],"finish_reason":"length","weight_versions":` +
					`[{"version":"a","start":0,"end":1},{"version":"b","start":1,"end":2},{"version":"c","start":2,"end":2}]}]}`,
			},
			err: "decode event: choices[0].weight_versions: 3 spans for 2 tokens",
		},
		{
			name:   "inverted span",
			events: []string{`{"choices":[{"index":0,"token_ids":[1,2],"finish_reason":"length","weight_versions":[{"version":"a","start":2,"end":0}]}]}`},
			err:    "decode event: choices[0].weight_versions[0]: end 0 before start 2",
		},
		{
			name:   "version not a string",
			events: []string{`{"choices":[{"index":0,"token_ids":[1],"finish_reason":"length","weight_versions":[{"version":["a"],"start":0,"end":1}]}]}`},
			err:    "decode event: json: cannot unmarshal array into Go struct field weightSpan.choices.weight_versions.version of type string",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStream{}
			s := NewStreamSink(f, nil)
			var err error
			for _, e := range tt.events {
				if err = s.Events(events(e), nil); err != nil {
					break
				}
			}
			require.EqualError(t, err, tt.err)
			assert.Len(t, f.sent, len(tt.events)-1, "nothing of the bad event goes out")
			_, isUpstream := errors.AsType[*gateway.StatusError](err)
			assert.False(t, isUpstream, "a malformed answer is the coordinator's problem (Internal)")
		})
	}
}

// TestSinksCheckTheFirstWeightVersion: both sinks tell the version check
// the version of each choice's first token once the answer names it, and
// end the answer with its error instead of sending it.
func TestSinksCheckTheFirstWeightVersion(t *testing.T) {
	t.Parallel()
	refuse := errors.New("mismatch")
	var seen []string
	check := func(v string) error {
		seen = append(seen, v)
		if v == "v2" {
			return refuse
		}
		return nil
	}
	unary := NewUnarySink(&coordinatorv1.TokensRequest{TokenIds: []uint32{1}}, check)
	err := unary.Response(200, "application/json", []byte(`{"choices":[{"index":0,"token_ids":[4,5],"weight_versions":[{"version":"v2","start":0,"end":1},{"version":"v3","start":1,"end":2}]}]}`))
	require.ErrorIs(t, err, refuse)
	assert.Nil(t, unary.Answer(), "a refused answer is not kept")
	require.NoError(t, unary.Response(200, "application/json", []byte(`{"choices":[{"index":0,"token_ids":[4],"weight_versions":[{"version":"v1","start":0,"end":1}]}]}`)))
	assert.NotNil(t, unary.Answer())

	f := &fakeStream{}
	stream := NewStreamSink(f, check)
	require.NoError(t, stream.Events(events(`{"choices":[{"index":0,"token_ids":[4]}]}`), nil), "no versions yet: nothing to check")
	err = stream.Events(events(`{"choices":[{"index":0,"token_ids":[5],"finish_reason":"length","weight_versions":[{"version":"v2","start":0,"end":2}]}]}`), nil)
	require.ErrorIs(t, err, refuse)
	assert.Len(t, f.sent, 1, "the chunk naming the mismatch is not sent")
	assert.Equal(t, []string{"v2", "v1", "v2"}, seen)
}
