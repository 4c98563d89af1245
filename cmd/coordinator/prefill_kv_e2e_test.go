package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// pdNoRender is prefill → decode with kv-nixl and no render step: a
// tokens-in request carries its own token IDs.
const pdNoRender = `
pipeline:
  kv_connector: kv-nixl
  steps:
    - type: prefill
    - type: decode
`

// pdNoRenderFallback is pdNoRender with the prefill step's
// fallback_to_decode on.
var pdNoRenderFallback = strings.Replace(pdNoRender, "    - type: prefill\n",
	"    - type: prefill\n      params:\n        fallback_to_decode: true\n", 1)

// legTokenIDs decodes a generate leg body's token_ids.
func legTokenIDs(t *testing.T, body []byte) []uint32 {
	t.Helper()
	var ids []uint32
	require.NoError(t, json.Unmarshal(field(t, body, "token_ids"), &ids), string(body))
	return ids
}

// decodeEngineID is the remote_engine_id of a generate decode leg's
// kv_transfer_params (under sampling_params.extra_args).
func decodeEngineID(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		SamplingParams struct {
			ExtraArgs struct {
				KV struct {
					EngineID string `json:"remote_engine_id"`
				} `json:"kv_transfer_params"`
			} `json:"extra_args"`
		} `json:"sampling_params"`
	}
	require.NoError(t, json.Unmarshal(body, &b), string(body))
	return b.SamplingParams.ExtraArgs.KV.EngineID
}

// TestGeneratePrefillWithoutRender: a tokens-in request through a
// pipeline without render is prefilled with its own prompt (REST, gRPC with
// a JSON body, gRPC with token IDs), never with "token_ids": [] (issue 35),
// and a malformed prompt is refused before any leg.
func TestGeneratePrefillWithoutRender(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", pdNoRender)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	prompt := []uint32{11, 22, 33, 44, 4294967295}
	const body = `{"model":"sim-model","token_ids":[11,22,33,44,4294967295],"sampling_params":{"max_tokens":3}}`
	wantLegs := []string{"gateway:prefill:/inference/v1/generate", "gateway:decode:/inference/v1/generate"}
	checkLegs := func(t *testing.T) {
		t.Helper()
		legs := s.Legs()
		require.Equal(t, wantLegs, legSummary(legs))
		assert.Equal(t, prompt, legTokenIDs(t, legs[0].Body), "the prefill leg carries the prompt")
		assert.Equal(t, prompt, legTokenIDs(t, legs[1].Body))
		assert.Equal(t, sim.PrefillEngineID, decodeEngineID(t, legs[1].Body), "decode takes the prefill's KV")
	}

	t.Run("rest", func(t *testing.T) {
		s.Reset()
		resp := st.post(t, "/inference/v1/generate", body, nil)
		answer := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, answer)
		checkLegs(t)
	})
	t.Run("grpc json", func(t *testing.T) {
		s.Reset()
		resp, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{
			Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_GENERATE, Json: []byte(body)}}})
		require.NoError(t, err)
		assert.EqualValues(t, http.StatusOK, resp.GetOpenai().GetStatusCode(), string(resp.GetOpenai().GetJson()))
		checkLegs(t)
	})
	t.Run("grpc tokens", func(t *testing.T) {
		s.Reset()
		_, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{
			Tokens: &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: prompt,
				Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(3)}}}})
		require.NoError(t, err)
		checkLegs(t)
	})
	t.Run("rest empty prompt", func(t *testing.T) {
		s.Reset()
		resp := st.post(t, "/inference/v1/generate", `{"model":"sim-model","token_ids":[],"sampling_params":{}}`, nil)
		answer := readAll(t, resp.Body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, answer)
		message, _, _ := openAIError(t, answer)
		assert.Contains(t, message, "token_ids must not be empty")
		assert.Empty(t, s.Legs(), "refused before any leg")
	})
}

// kvCase is one request of TestPrefillWithoutKVParamsThroughTheApp.
type kvCase struct {
	name, path, body string
	prefill          bool // whether the endpoint has a prefill leg (not Responses)
}

var kvCases = []kvCase{
	{name: "chat", path: "/v1/chat/completions", prefill: true,
		body: `{"model":"sim-model","messages":[{"role":"user","content":"no kv"}],"max_tokens":3}`},
	{name: "chat stream", path: "/v1/chat/completions", prefill: true,
		body: `{"model":"sim-model","messages":[{"role":"user","content":"no kv"}],"max_tokens":3,"stream":true}`},
	{name: "completions", path: "/v1/completions", prefill: true, body: `{"model":"sim-model","prompt":"no kv","max_tokens":3}`},
	{name: "generate", path: "/inference/v1/generate", prefill: true,
		body: `{"model":"sim-model","token_ids":[1,2,3],"sampling_params":{"max_tokens":3}}`},
	{name: "messages", path: "/v1/messages", prefill: true,
		body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"no kv"}]}`},
	{name: "responses", path: "/v1/responses", body: `{"model":"sim-model","max_output_tokens":3,"input":"no kv"}`},
}

// noKV is the fault of a prefill worker that answers without
// kv_transfer_params (the llm-d inference simulator on Messages).
var noKV = http.Header{sim.FaultHeader: {"prefill=no-kv-params"}}

const nixlMissing = "prefill: answer lacks kv_transfer_params remote_engine_id, remote_block_ids, remote_host, remote_port (kv-nixl)"

// TestPrefillWithoutKVParamsThroughTheApp: decision D26 on every endpoint,
// REST and gRPC. A prefill answer without the kv_transfer_params kv-nixl
// needs fails the request with 502 naming them (no decode leg with a bare
// do_remote_prefill), or, with fallback_to_decode, decode serves alone and
// coordinator_prefill_fallbacks_total{reason="missing_kv_params"} counts it.
func TestPrefillWithoutKVParamsThroughTheApp(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	strict := startStack(t, gw, "", pdNoRender)
	lenient := startStack(t, gw, "", pdNoRenderFallback)
	const metric = `coordinator_prefill_fallbacks_total{reason="missing_kv_params"}`

	for _, c := range kvCases {
		t.Run("rest fails/"+c.name, func(t *testing.T) {
			s.Reset()
			resp := strict.post(t, c.path, c.body, noKV)
			answer := readAll(t, resp.Body)
			if !c.prefill {
				assert.Equal(t, http.StatusOK, resp.StatusCode, answer)
				assert.Equal(t, []string{"gateway:decode:" + c.path}, legSummary(s.Legs()))
				return
			}
			require.Equal(t, http.StatusBadGateway, resp.StatusCode, answer)
			assert.Contains(t, answer, nixlMissing)
			assert.Equal(t, []string{"gateway:prefill:" + c.path}, legSummary(s.Legs()), "no decode leg")
		})
	}
	for i, c := range kvCases {
		t.Run("rest falls back/"+c.name, func(t *testing.T) {
			s.Reset()
			resp := lenient.post(t, c.path, c.body, noKV)
			answer := readAll(t, resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode, answer)
			legs := s.Legs()
			if c.prefill {
				require.Equal(t, []string{"gateway:prefill:" + c.path, "gateway:decode:" + c.path}, legSummary(legs))
				assert.NotContains(t, string(legs[1].Body), "kv_transfer_params", "decode serves alone")
			}
			assert.Equal(t, fallbacksUpTo(kvCases[:i+1]), lenient.scrape(t, metric))
		})
	}
	t.Run("grpc", func(t *testing.T) { prefillWithoutKVOverGRPC(t, s, strict, lenient) })
}

// fallbacksUpTo is how many of cases have a prefill leg, as the metric
// shows it.
func fallbacksUpTo(cases []kvCase) string {
	n := 0
	for _, c := range cases {
		if c.prefill {
			n++
		}
	}
	return strconv.Itoa(n)
}

// prefillWithoutKVOverGRPC: the same over gRPC, with a JSON chat body and
// with token IDs: UNAVAILABLE naming the fields, or decode alone.
func prefillWithoutKVOverGRPC(t *testing.T, s *sim.Sim, strict, lenient *stack) {
	ctx := func() context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), sim.FaultHeader, "prefill=no-kv-params")
	}
	requests := map[string]*coordinatorv1.GenerateRequest{
		"chat json": chatRequest("", `{"model":"sim-model","messages":[{"role":"user","content":"no kv"}],"max_tokens":3}`),
		"tokens": {Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{
			Model: sim.DefaultModel, TokenIds: []uint32{1, 2, 3}, Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(3)}}}},
	}
	for name, req := range requests {
		s.Reset()
		_, err := coordinatorv1.NewCoordinatorServiceClient(strict.conn).Generate(ctx(), req)
		st, _ := status.FromError(err)
		assert.Equal(t, codes.Unavailable, st.Code(), "%s: %v", name, err)
		assert.Contains(t, st.Message(), nixlMissing, name)
		assert.Len(t, s.Legs(), 1, "%s: no decode leg", name)

		s.Reset()
		_, err = coordinatorv1.NewCoordinatorServiceClient(lenient.conn).Generate(ctx(), req)
		require.NoError(t, err, name)
		legs := s.Legs()
		require.Len(t, legs, 2, name)
		assert.NotContains(t, string(legs[1].Body), "kv_transfer_params", "%s: decode serves alone", name)
	}
}
