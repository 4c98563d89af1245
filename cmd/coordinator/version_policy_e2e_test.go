package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// pdVersioned is the P/D pipeline (tokens-in legs, whose answers name
// their weight versions) under a version policy.
const pdVersioned = `
pipeline:
  kv_connector: kv-nixl
  use_openai_format: false
  version_policy: %s
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: prefill
    - type: decode
`

// TestVersionPolicy: a P/D request whose prefill ran on v1 and decode on
// v2 (a weight update between the legs) is served under "any", the
// prefill's version in x-prefill-weight-version, and refused under
// "consistent" with a retryable UNAVAILABLE naming both; counted under
// both.
func TestVersionPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"any", "consistent"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 4})
			require.NoError(t, s.ListenEngines(context.Background(), "127.0.0.1:0"))
			t.Cleanup(s.CloseEngines)
			st := startStack(t, gw, render, fmt.Sprintf(pdVersioned, policy))
			client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
			in := &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: []uint32{5, 6, 7}, Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(3)}}

			var header metadata.MD
			resp, err := client.Generate(t.Context(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: in}}, grpc.Header(&header))
			require.NoError(t, err, "one version on both legs")
			assert.Equal(t, []string{"v1"}, header.Get("x-prefill-weight-version"))
			assert.Equal(t, "v1", resp.GetTokens().GetChoices()[0].GetWeightVersions()[0].GetVersion())

			setWeightVersion(t, s, "v2") // the decode engines only: the update fell between the legs
			header = nil
			resp, err = client.Generate(t.Context(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: in}}, grpc.Header(&header))
			stream, serr := client.GenerateStream(t.Context(), &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: in}})
			require.NoError(t, serr)
			streamErr := drain(stream)
			if policy == "any" {
				require.NoError(t, err)
				assert.Equal(t, []string{"v1"}, header.Get("x-prefill-weight-version"), "the prefill's version, stamped")
				assert.Equal(t, "v2", resp.GetTokens().GetChoices()[0].GetWeightVersions()[0].GetVersion(), "the decode's, in the answer")
				assert.NoError(t, streamErr)
			} else {
				for _, err := range []error{err, streamErr} {
					st := status.Convert(err)
					require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
					assert.Contains(t, st.Message(), `the prefill ran on weights "v1" and the decode on "v2"`)
					var info *errdetails.ErrorInfo
					for _, d := range st.Details() {
						if i, ok := d.(*errdetails.ErrorInfo); ok {
							info = i
						}
					}
					require.NotNil(t, info, "%v", st.Details())
					assert.Equal(t, "WEIGHT_VERSION_MISMATCH", info.GetReason())
					assert.Equal(t, map[string]string{"prefill_version": "v1", "decode_version": "v2"}, info.GetMetadata())
				}
			}
			assert.Equal(t, "2", st.scrape(t, `coordinator_weight_version_mismatches_total{policy="`+policy+`"}`), "Generate and GenerateStream")

			rest := st.post(t, "/inference/v1/generate", `{"model":"`+sim.DefaultModel+`","token_ids":[5,6,7],"sampling_params":{"max_tokens":2}}`, nil)
			assert.Equal(t, http.StatusOK, rest.StatusCode, readAll(t, rest.Body))
			assert.Equal(t, "v1", rest.Header.Get("X-Prefill-Weight-Version"), "REST clients get the prefill's version too")
		})
	}
}

// drain reads a stream to its end and returns how it ended (nil: cleanly).
func drain(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]) error {
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
