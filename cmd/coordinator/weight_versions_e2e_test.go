package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// spanView is a WeightVersionSpan in plain Go values, for readable diffs.
type spanView struct {
	Version      string
	Start, Count uint32
}

func spansOf(c *coordinatorv1.TokensChoice) []spanView {
	var out []spanView
	for _, s := range c.GetWeightVersions() {
		out = append(out, spanView{Version: s.GetVersion(), Start: s.GetStart(), Count: s.GetCount()})
	}
	return out
}

// TestTokensWeightVersions: every choice of a tokens answer names the
// weights of the decode engine that produced it (the simulator's "v1" until
// set), on Generate and on GenerateStream (there with the choice's last
// chunk only, covering its whole output); once the trainer set a new version
// on the engine (POST /update_weight_version on its own address), new
// answers carry that one.
func TestTokensWeightVersions(t *testing.T) {
	t.Parallel()
	pipelines := []struct{ name, yaml string }{
		{name: "decode-only", yaml: decodeOnly},
		{name: "cascade", yaml: fullPipeline},
	}
	for _, p := range pipelines {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			s, gw, render := startSim(t, sim.Options{Strict: true})
			require.NoError(t, s.ListenEngines(context.Background(), "127.0.0.1:0"))
			t.Cleanup(s.CloseEngines)
			client := coordinatorv1.NewCoordinatorServiceClient(startStack(t, gw, render, p.yaml).conn)
			tc := tokensCase{prompt: tokensPrompt, n: 2, maxTokens: 5, k: 0}

			for round, version := range []string{sim.DefaultWeightVersion, "step-2"} {
				if round > 0 {
					setWeightVersion(t, s, version)
				}
				want := map[uint32][]spanView{
					0: {{Version: version, Count: tc.maxTokens}},
					1: {{Version: version, Count: tc.maxTokens}},
				}
				id := fmt.Sprintf("wv-%s-%d", p.name, round)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()

				resp, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{
					RequestId: id + "-unary", Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: tc.request()},
				})
				require.NoError(t, err)
				got := map[uint32][]spanView{}
				for _, c := range resp.GetTokens().GetChoices() {
					got[c.GetIndex()] = spansOf(c)
				}
				assert.Equal(t, want, got, "Generate, version %s", version)

				stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
					RequestId: id + "-stream", Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tc.request()},
				})
				require.NoError(t, err)
				got, err = recvWeightVersions(stream)
				require.NoError(t, err)
				assert.Equal(t, want, got, "GenerateStream, version %s", version)
			}
		})
	}
}

// recvWeightVersions reads a tokens stream to its end and returns each
// choice's weight versions, which must come with its finishing chunk only.
func recvWeightVersions(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]) (map[uint32][]spanView, error) {
	out := map[uint32][]spanView{}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for _, c := range msg.GetTokens().GetChoices() {
			spans := spansOf(c)
			switch _, seen := out[c.GetIndex()]; {
			case c.GetFinishReason() == coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED && spans != nil:
				return nil, fmt.Errorf("choice %d: weight versions %v before its last chunk", c.GetIndex(), spans)
			case c.GetFinishReason() != coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED && seen:
				return nil, fmt.Errorf("choice %d: finished twice", c.GetIndex())
			case c.GetFinishReason() != coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED:
				out[c.GetIndex()] = spans
			}
		}
	}
}

// setWeightVersion sets version on every decode engine through its control
// route, as a trainer does after a weight update.
func setWeightVersion(t *testing.T, s *sim.Sim, version string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	for _, e := range s.Engines() {
		if e.Role != "decode" {
			continue
		}
		resp, err := client.Post("http://"+e.Addr+"/update_weight_version", "application/json",
			strings.NewReader(`{"new_version":"`+version+`"}`))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Equal(t, version, e.WeightVersion(), e.ID)
	}
}
