package tokens

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

func TestAppendTokensBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		id     string
		in     *coordinatorv1.TokensRequest
		stream bool
		want   string
	}{
		{
			name: "prompt only",
			id:   "r1",
			in:   &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1, 2, 3}},
			want: `{"request_id":"r1","model":"m","token_ids":[1,2,3],"sampling_params":{},"stream":false}`,
		},
		{
			name:   "streamed: usage asked for",
			id:     "r2",
			in:     &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{7}},
			stream: true,
			want:   `{"request_id":"r2","model":"m","token_ids":[7],"sampling_params":{},"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "IDs over the whole uint32 range",
			id:   "r3",
			in:   &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{0, 1<<31 - 1, 1 << 31, 1<<32 - 1}},
			want: `{"request_id":"r3","model":"m","token_ids":[0,2147483647,2147483648,4294967295],"sampling_params":{},"stream":false}`,
		},
		{
			name: "every sampling param, in field order",
			id:   "r4",
			in: &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{5}, Sampling: &coordinatorv1.SamplingParams{
				MaxTokens: proto.Uint32(16), MinTokens: proto.Uint32(2), Temperature: proto.Float32(0.7), TopP: proto.Float32(0.95),
				TopK: proto.Int32(-1), MinP: proto.Float32(0.05), Seed: proto.Int64(-42), StopTokenIds: []uint32{13, 1 << 31},
				IgnoreEos: true, Logprobs: proto.Uint32(5), PromptLogprobs: proto.Uint32(1), N: 4,
				PresencePenalty: proto.Float32(-1.5), FrequencyPenalty: proto.Float32(0.1), RepetitionPenalty: proto.Float32(1.1),
			}},
			want: `{"request_id":"r4","model":"m","token_ids":[5],"sampling_params":{"max_tokens":16,"min_tokens":2,` +
				`"temperature":0.7,"top_p":0.95,"top_k":-1,"min_p":0.05,"seed":-42,"stop_token_ids":[13,2147483648],` +
				`"ignore_eos":true,"logprobs":5,"prompt_logprobs":1,"n":4,"presence_penalty":-1.5,"frequency_penalty":0.1,` +
				`"repetition_penalty":1.1},"stream":false}`,
		},
		{
			name: "zero values that are set are sent",
			id:   "r5",
			in: &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{5}, Sampling: &coordinatorv1.SamplingParams{
				Temperature: proto.Float32(0), Logprobs: proto.Uint32(0), TopK: proto.Int32(0), Seed: proto.Int64(0), MinTokens: proto.Uint32(0),
			}},
			want: `{"request_id":"r5","model":"m","token_ids":[5],"sampling_params":{"min_tokens":0,"temperature":0,"top_k":0,"seed":0,"logprobs":0},"stream":false}`,
		},
		{
			name: "tiny and large floats stay JSON numbers",
			id:   "r6",
			in: &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{5}, Sampling: &coordinatorv1.SamplingParams{
				Temperature: proto.Float32(1e-7), MinP: proto.Float32(1),
			}},
			want: `{"request_id":"r6","model":"m","token_ids":[5],"sampling_params":{"temperature":1e-07,"min_p":1},"stream":false}`,
		},
		{
			name: "images, cache salt, escapes",
			id:   "r7",
			in: &coordinatorv1.TokensRequest{Model: `m"<x>`, TokenIds: []uint32{1, 9, 9, 9, 2}, CacheSalt: "s\n", Features: &coordinatorv1.MultimodalFeatures{
				MmHashes:       []string{"ha", "hb"},
				MmPlaceholders: []*coordinatorv1.Placeholder{{Offset: 1, Length: 2}, {Offset: 3, Length: 1}},
				KwargsData:     []*coordinatorv1.KwargsItem{{}, {Data: proto.String("QUJD")}},
			}},
			want: `{"request_id":"r7","model":"m\"<x>","token_ids":[1,9,9,9,2],"features":{"mm_hashes":{"image":["ha","hb"]},` +
				`"mm_placeholders":{"image":[{"offset":1,"length":2},{"offset":3,"length":1}]},"kwargs_data":{"image":[null,"QUJD"]}},` +
				`"sampling_params":{},"cache_salt":"s\n","stream":false}`,
		},
		{
			name: "images from the encoder cache: no kwargs_data",
			id:   "r8",
			in: &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1, 9}, Features: &coordinatorv1.MultimodalFeatures{
				MmHashes: []string{"ha"}, MmPlaceholders: []*coordinatorv1.Placeholder{{Offset: 1, Length: 1}},
			}},
			want: `{"request_id":"r8","model":"m","token_ids":[1,9],"features":{"mm_hashes":{"image":["ha"]},` +
				`"mm_placeholders":{"image":[{"offset":1,"length":1}]}},"sampling_params":{},"stream":false}`,
		},
		{
			name: "empty features are no features",
			id:   "r9",
			in:   &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1}, Features: &coordinatorv1.MultimodalFeatures{}},
			want: `{"request_id":"r9","model":"m","token_ids":[1],"sampling_params":{},"stream":false}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := appendTokensBody(nil, tt.id, tt.in, tt.stream)
			assert.Equal(t, tt.want, string(got))
			assert.True(t, json.Valid(got))
		})
	}
}

func TestAppendTokensBodyFloatsReadBack(t *testing.T) {
	t.Parallel()
	for _, v := range []float32{0.7, 0.1, 1.0 / 3, 99.99999, 1e-30, 2} {
		in := &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1}, Sampling: &coordinatorv1.SamplingParams{Temperature: proto.Float32(v)}}
		var body struct {
			SamplingParams struct {
				Temperature float32 `json:"temperature"`
			} `json:"sampling_params"`
		}
		require.NoError(t, json.Unmarshal(appendTokensBody(nil, "r", in, false), &body))
		assert.Equal(t, v, body.SamplingParams.Temperature) //nolint:testifylint // exact by design
	}
}

func TestNewTokensContext(t *testing.T) {
	t.Parallel()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer x", "user-agent", "grpc-go"))
	in := &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1, 2, 3, 4}, Features: &coordinatorv1.MultimodalFeatures{
		MmHashes:       []string{"ha", "hb"},
		MmPlaceholders: []*coordinatorv1.Placeholder{{Offset: 1, Length: 1}, {Offset: 2, Length: 2}},
		KwargsData:     []*coordinatorv1.KwargsItem{{Data: proto.String("T")}, {}},
	}}
	rc := NewRequestContext(ctx, "id-1", "id-1", in, true)
	assert.Equal(t, "id-1", rc.RequestID)
	assert.Equal(t, legs.FormatGenerate, rc.Format)
	assert.Equal(t, "m", rc.Model)
	assert.True(t, rc.Stream)
	assert.Equal(t, []uint32{1, 2, 3, 4}, rc.Tokens.IDs())
	assert.Zero(t, rc.Header.Len(), "the service adds the headers its policy lets through")
	assert.Equal(t, string(appendTokensBody(nil, "id-1", in, true)), string(rc.Body))
	assert.Equal(t, []features.MultimodalEntry{
		{Index: 0, Hash: "ha", KwargsData: []byte(`"T"`), Placeholder: features.Placeholder{Offset: 1, Length: 1}},
		{Index: 1, Hash: "hb", KwargsData: []byte(`null`), Placeholder: features.Placeholder{Offset: 2, Length: 2}},
	}, rc.Multimodal)

	rc = NewRequestContext(context.Background(), "id-2", "id-2", &coordinatorv1.TokensRequest{Model: "m", TokenIds: []uint32{1}}, false)
	assert.False(t, rc.Stream)
	assert.Nil(t, rc.Multimodal)
}

func BenchmarkAppendTokensBody(b *testing.B) {
	ids := make([]uint32, 4096)
	for i := range ids {
		ids[i] = uint32(i * 7919)
	}
	in := &coordinatorv1.TokensRequest{Model: "Qwen/Qwen3-8B", TokenIds: ids, Sampling: &coordinatorv1.SamplingParams{
		MaxTokens: proto.Uint32(1024), Temperature: proto.Float32(1), TopP: proto.Float32(1), Logprobs: proto.Uint32(0), N: 8, Seed: proto.Int64(1),
	}}
	b.ReportAllocs()
	for b.Loop() {
		_ = appendTokensBody(nil, "0b8f2c6e-3f4d-4c55-9e0a-7d1b2c3d4e5f", in, true)
	}
}
