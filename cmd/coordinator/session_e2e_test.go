package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// pdPinned is the P/D pipeline with its legs pinned to one of 4
// data-parallel ranks.
const pdPinned = `
pipeline:
  kv_connector: kv-nixl
  dp_size: 4
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: prefill
    - type: decode
`

// TestASessionKeepsItsWorkersAndRank: three turns of one session over P/D
// land on one prefill and one decode engine of a gateway that binds
// sessions (the llm-d EPP's session_id strategy), every leg carries the
// session id, and the prefill and decode legs of every turn carry one
// data-parallel rank, the session's. A request without a session pins its
// two legs to its own request id's rank.
func TestASessionKeepsItsWorkersAndRank(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3, SessionAffinity: sim.SessionByID,
		Engines: sim.EngineCounts{Prefill: 3, Decode: 3}})
	st := startStack(t, gw, render, pdPinned)
	const session = "agent-7"
	wantRank := headers.DPRank(session, 4)

	engines := map[string]map[string]bool{"prefill": {}, "decode": {}}
	for turn := range 3 {
		id := fmt.Sprintf("turn-%d", turn)
		// Another session's request between turns moves the round robin on.
		other := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"other"}]}`,
			http.Header{"X-Session-Id": {fmt.Sprintf("other-%d", turn)}})
		require.Equal(t, http.StatusOK, other.StatusCode, readAll(t, other.Body))

		resp := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"turn `+id+`"}]}`,
			http.Header{"X-Session-Id": {session}, "X-Request-Id": {id}})
		require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
		for _, profile := range []string{"prefill", "decode"} {
			legs := pdLegs(s, id, profile)
			require.Len(t, legs, 1, "%s %s", id, profile)
			leg := legs[0]
			assert.Equal(t, session, leg.Header.Get("X-Session-Id"), "%s %s: the session reaches the leg", id, profile)
			assert.Equal(t, wantRank, leg.Header.Get("X-Data-Parallel-Rank"), "%s %s: the session's rank", id, profile)
			engines[profile][leg.Engine] = true
		}
	}
	assert.Len(t, engines["prefill"], 1, "every turn on one prefill engine: %v", engines["prefill"])
	assert.Len(t, engines["decode"], 1, "every turn on one decode engine: %v", engines["decode"])

	resp := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"alone"}]}`,
		http.Header{"X-Request-Id": {"no-session"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p, d := pdLegs(s, "no-session", "prefill"), pdLegs(s, "no-session", "decode")
	require.Len(t, p, 1)
	require.Len(t, d, 1)
	assert.Equal(t, headers.DPRank("no-session", 4), p[0].Header.Get("X-Data-Parallel-Rank"), "the request id's rank")
	assert.Equal(t, p[0].Header.Get("X-Data-Parallel-Rank"), d[0].Header.Get("X-Data-Parallel-Rank"), "one rank for both legs")

	spoofed := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"spoof"}]}`,
		http.Header{"X-Request-Id": {"spoofed"}, "X-Data-Parallel-Rank": {"3"}, "X-Session-Id": {session}})
	require.Equal(t, http.StatusOK, spoofed.StatusCode)
	for _, profile := range []string{"prefill", "decode"} {
		assert.Equal(t, []string{wantRank}, pdLegs(s, "spoofed", profile)[0].Header.Values("X-Data-Parallel-Rank"),
			"%s: the coordinator's rank, never the client's", profile)
	}
}

// TestNoPinningByDefault: without pipeline.dp_size no leg carries a rank.
func TestNoPinningByDefault(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3})
	st := startStack(t, gw, render, fmt.Sprintf(pdDisaggregated, true))
	resp := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"hi"}]}`,
		http.Header{"X-Request-Id": {"plain"}, "X-Session-Id": {"s"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, profile := range []string{"prefill", "decode"} {
		legs := pdLegs(s, "plain", profile)
		require.Len(t, legs, 1)
		assert.Empty(t, legs[0].Header.Values("X-Data-Parallel-Rank"), profile)
		assert.Equal(t, "s", legs[0].Header.Get("X-Session-Id"), profile)
	}
}

// TestASessionOverGRPC: the session id of a gRPC call (its metadata)
// reaches the legs and picks their rank as over REST.
func TestASessionOverGRPC(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3})
	st := startStack(t, gw, render, pdPinned)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-session-id", "rollout-group-9")
	_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(ctx, &coordinatorv1.GenerateRequest{
		RequestId: "grpc-session",
		Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{
			Model: sim.DefaultModel, TokenIds: []uint32{1, 2, 3}, Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(2)}}},
	})
	require.NoError(t, err)
	for _, profile := range []string{"prefill", "decode"} {
		legs := pdLegs(s, "grpc-session", profile)
		require.Len(t, legs, 1, profile)
		assert.Equal(t, "rollout-group-9", legs[0].Header.Get("X-Session-Id"), profile)
		assert.Equal(t, headers.DPRank("rollout-group-9", 4), legs[0].Header.Get("X-Data-Parallel-Rank"), profile)
	}
}

// TestASessionTokenKeepsBothWorkers: under the EPP's pod-token strategy
// (encoded_endpoint_header) the client of a P/D pipeline gets one
// x-session-token joining the prefill's and the decode's; sent back, each
// leg gets its own phase's, and three turns land on one prefill and one
// decode engine. The decode's token alone would have steered the prefill
// leg to a decode pod's name.
func TestASessionTokenKeepsBothWorkers(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3, SessionAffinity: sim.SessionByToken,
		Engines: sim.EngineCounts{Prefill: 3, Decode: 3}})
	st := startStack(t, gw, render, fmt.Sprintf(pdDisaggregated, true))
	token := ""
	engines := map[string]map[string]bool{"prefill": {}, "decode": {}}
	for turn := range 3 {
		other := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"other"}]}`, nil)
		require.Equal(t, http.StatusOK, other.StatusCode, readAll(t, other.Body))

		id := fmt.Sprintf("token-turn-%d", turn)
		h := http.Header{"X-Request-Id": {id}}
		if token != "" {
			h.Set("X-Session-Token", token)
		}
		resp := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"`+id+`"}]}`, h)
		require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
		next := resp.Header.Get("X-Session-Token")
		tokens, joined := headers.SplitSessionToken(next)
		require.True(t, joined, "one token joining both phases: %q", next)
		for _, profile := range []string{"prefill", "decode"} {
			legs := pdLegs(s, id, profile)
			require.Len(t, legs, 1)
			engines[profile][legs[0].Engine] = true
			own := tokens.Prefill
			if profile == "decode" {
				own = tokens.Decode
			}
			assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(legs[0].Engine)), own, "%s: the answer's token names the %s engine", id, profile)
			if turn > 0 {
				assert.Equal(t, own, legs[0].Header.Get("X-Session-Token"), "%s %s: the leg got its own phase's token back", id, profile)
			}
		}
		token = next
	}
	assert.Len(t, engines["prefill"], 1, "%v", engines["prefill"])
	assert.Len(t, engines["decode"], 1, "%v", engines["decode"])

	resp := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"x"}]}`,
		http.Header{"X-Request-Id": {"bad-token"}, "X-Session-Token": {"pd1.!!!.???"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "a joined token that does not decode steers nothing")
	for _, profile := range []string{"prefill", "decode"} {
		assert.Empty(t, pdLegs(s, "bad-token", profile)[0].Header.Values("X-Session-Token"), profile)
	}
}
