package main

import (
	"context"
	"fmt"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// Tokens requests the coordinator refuses before any leg.

func TestTokensInvalidInput(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	valid := func(edit func(*coordinatorv1.TokensRequest)) *coordinatorv1.TokensRequest {
		r := tokensCase{prompt: []uint32{1, 2, 3, 4}, n: 1, maxTokens: 2, k: 0}.request()
		edit(r)
		return r
	}
	image := func(offset, length uint32) *coordinatorv1.MultimodalFeatures {
		return &coordinatorv1.MultimodalFeatures{MmHashes: []string{"h"}, MmPlaceholders: []*coordinatorv1.Placeholder{{Offset: offset, Length: length}}}
	}
	tests := []struct {
		name  string
		id    string
		req   *coordinatorv1.TokensRequest
		field string // the violation's field path
		msg   string
	}{
		{name: "empty token_ids", req: valid(func(r *coordinatorv1.TokensRequest) { r.TokenIds = nil }), field: "tokens.token_ids"},
		{name: "no model", req: valid(func(r *coordinatorv1.TokensRequest) { r.Model = "" }), field: "tokens.model"},
		{name: "top_p 0", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.TopP = proto.Float32(0) }), field: "tokens.sampling.top_p"},
		{name: "temperature NaN", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.Temperature = proto.Float32(float32(nan())) }), field: "tokens.sampling.temperature"},
		{name: "logprobs 21", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.Logprobs = proto.Uint32(21) }), field: "tokens.sampling.logprobs"},
		{name: "n 300", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.N = 300 }), field: "tokens.sampling.n"},
		{name: "max_tokens 0", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.MaxTokens = proto.Uint32(0) }), field: "tokens.sampling.max_tokens"},
		{name: "min_tokens over max_tokens", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.MinTokens = proto.Uint32(3) }),
			field: "tokens.sampling", msg: "min_tokens must not exceed max_tokens"},
		{name: "repetition_penalty 0", req: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.RepetitionPenalty = proto.Float32(0) }), field: "tokens.sampling.repetition_penalty"},
		{name: "bad request_id", id: "bad id!", req: valid(func(*coordinatorv1.TokensRequest) {}), field: "request_id"},
		{name: "features lists not parallel", req: valid(func(r *coordinatorv1.TokensRequest) {
			r.Features = image(0, 1)
			r.Features.MmHashes = append(r.Features.MmHashes, "h2")
		}), field: "tokens.features", msg: "mm_placeholders must have one entry per mm_hashes entry"},
		{name: "placeholder past the prompt", req: valid(func(r *coordinatorv1.TokensRequest) { r.Features = image(2, 3) }),
			field: "tokens", msg: "must each lie within token_ids"},
		{name: "placeholder length 0", req: valid(func(r *coordinatorv1.TokensRequest) { r.Features = image(0, 0) }), field: "tokens.features.mm_placeholders[0].length"},
		{name: "empty image hash", req: valid(func(r *coordinatorv1.TokensRequest) { r.Features = image(0, 1); r.Features.MmHashes[0] = "" }),
			field: "tokens.features.mm_hashes[0]"},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", tt.name, streamed), func(t *testing.T) {
				t.Parallel()
				var err error
				if streamed {
					var stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]
					stream, err = client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
						RequestId: tt.id, Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tt.req},
					})
					require.NoError(t, err)
					_, err = stream.Recv()
				} else {
					_, err = client.Generate(context.Background(), &coordinatorv1.GenerateRequest{
						RequestId: tt.id, Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: tt.req},
					})
				}
				st := status.Convert(err)
				require.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
				assert.Contains(t, st.Message(), tt.msg)
				assert.Contains(t, violationFields(st), tt.field)
			})
		}
	}

	t.Run("prompt_logprobs on a stream", func(t *testing.T) {
		t.Parallel()
		stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
			Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: valid(func(r *coordinatorv1.TokensRequest) { r.Sampling.PromptLogprobs = proto.Uint32(0) })},
		})
		require.NoError(t, err)
		_, err = stream.Recv()
		st := status.Convert(err)
		require.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
		assert.Contains(t, st.Message(), "prompt_logprobs is returned by Generate only")
		assert.Contains(t, violationFields(st), "tokens")
	})
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

// violationFields lists the field paths of the protovalidate violations
// attached to st.
func violationFields(st *status.Status) []string {
	var out []string
	for _, d := range st.Details() {
		if v, ok := d.(*validate.Violations); ok {
			for _, vv := range v.GetViolations() {
				out = append(out, protovalidate.FieldPathString(vv.GetField()))
			}
		}
	}
	return out
}
