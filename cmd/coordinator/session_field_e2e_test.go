package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// sessionTokens is a small tokens input of Generate.
func sessionTokens() *coordinatorv1.TokensRequest {
	return &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: []uint32{1, 2, 3},
		Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(2)}}
}

// sessionChat is a streaming chat input of GenerateStream.
func sessionChat() *coordinatorv1.OpenAIRequest {
	return &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS,
		Json: []byte(`{"model":"` + sim.DefaultModel + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`)}
}

// assertSessionLegs checks that the prefill and decode legs of request id
// each carry session as their one session header and its rank.
func assertSessionLegs(t *testing.T, s *sim.Sim, id, session string) {
	t.Helper()
	for _, profile := range []string{"prefill", "decode"} {
		legs := pdLegs(s, id, profile)
		require.Len(t, legs, 1, "%s %s", id, profile)
		assert.Equal(t, []string{session}, legs[0].Header.Values("X-Session-Id"), "%s %s: the session on the leg", id, profile)
		assert.Equal(t, []string{headers.DPRank(session, 4)}, legs[0].Header.Values("X-Data-Parallel-Rank"),
			"%s %s: the session's rank", id, profile)
	}
}

// TestTheSessionFieldReachesEveryLeg: a Generate or GenerateStream call's
// session_id goes on its prefill and decode legs as x-session-id and picks
// their data-parallel rank, as the call metadata of that name does; when
// both are given the field wins.
func TestTheSessionFieldReachesEveryLeg(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3})
	st := startStack(t, gw, render, pdPinned)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)

	_, err := client.Generate(t.Context(), &coordinatorv1.GenerateRequest{RequestId: "field-unary", SessionId: "rollout-3",
		Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: sessionTokens()}})
	require.NoError(t, err)
	assertSessionLegs(t, s, "field-unary", "rollout-3")

	stream, err := client.GenerateStream(t.Context(), &coordinatorv1.GenerateStreamRequest{RequestId: "field-stream", SessionId: "agent 7/b",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: sessionChat()}})
	require.NoError(t, err)
	require.NoError(t, drain(stream))
	assertSessionLegs(t, s, "field-stream", "agent 7/b")

	stream, err = client.GenerateStream(t.Context(), &coordinatorv1.GenerateStreamRequest{RequestId: "field-stream-tokens", SessionId: "rollout-4",
		Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: sessionTokens()}})
	require.NoError(t, err)
	require.NoError(t, drain(stream))
	assertSessionLegs(t, s, "field-stream-tokens", "rollout-4")

	both := metadata.AppendToOutgoingContext(t.Context(), "x-session-id", "from-metadata")
	_, err = client.Generate(both, &coordinatorv1.GenerateRequest{RequestId: "field-wins", SessionId: "from-field",
		Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: sessionTokens()}})
	require.NoError(t, err)
	assertSessionLegs(t, s, "field-wins", "from-field")

	stream, err = client.GenerateStream(both, &coordinatorv1.GenerateStreamRequest{RequestId: "metadata-alone",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: sessionChat()}})
	require.NoError(t, err)
	require.NoError(t, drain(stream))
	assertSessionLegs(t, s, "metadata-alone", "from-metadata")
}

// TestABadSessionFieldIsRefused: a session_id that could not travel as a
// header value (past 1024 bytes, a control or non-ASCII byte, a space at
// either end) is INVALID_ARGUMENT naming the field, on Generate and
// GenerateStream, and no leg is sent.
func TestABadSessionFieldIsRefused(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3})
	st := startStack(t, gw, render, pdPinned)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for name, id := range map[string]string{
		"too long":       strings.Repeat("s", 1025),
		"newline":        "a\nb",
		"non-ascii":      "sessión",
		"leading space":  " s",
		"trailing space": "s ",
		"nul":            "a\x00b",
	} {
		_, err := client.Generate(t.Context(), &coordinatorv1.GenerateRequest{SessionId: id,
			Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: sessionTokens()}})
		got := status.Convert(err)
		require.Equal(t, codes.InvalidArgument, got.Code(), "%s: %v", name, err)
		assert.Contains(t, violationFields(got), "session_id", name)

		stream, err := client.GenerateStream(t.Context(), &coordinatorv1.GenerateStreamRequest{SessionId: id,
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: sessionChat()}})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.NotErrorIs(t, err, io.EOF, name)
		got = status.Convert(err)
		require.Equal(t, codes.InvalidArgument, got.Code(), "%s: %v", name, err)
		assert.Contains(t, violationFields(got), "session_id", name)
	}
	_, err := client.Generate(t.Context(), &coordinatorv1.GenerateRequest{RequestId: "longest", SessionId: strings.Repeat("s", 1024),
		Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: sessionTokens()}})
	require.NoError(t, err, "1024 bytes is within the bound")
	assertSessionLegs(t, s, "longest", strings.Repeat("s", 1024))
	assert.Len(t, s.Legs(), 2, "no leg for a refused call")
}
