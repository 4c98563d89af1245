package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Flows across the encode, prefill and decode steps, built from config as
// the app builds them (pipeline-level defaults injected into every step).

// phasePipeline builds encode → prefill → decode against the fake at url.
func phasePipeline(t *testing.T, url string, d steps.Defaults) *steps.Pipeline {
	t.Helper()
	client := phaseClient(t, url)
	kvs := phaseKVSet(t)
	plugins := []steps.Plugin{
		builtin.NewEncodePlugin(client, phaseECSet(t)),
		builtin.NewPrefillPlugin(client, kvs, phaseECSet(t)),
		builtin.NewDecodePlugin(client, kvs),
	}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: builtin.EncodeType}, {Type: builtin.PrefillType}, {Type: builtin.DecodeType}}, d)
	require.NoError(t, err)
	return p
}

// legTrail lists the legs' EPP-Profile and path in arrival order.
func legTrail(gw legSource) []string {
	var out []string
	for _, l := range gw.Legs() {
		out = append(out, l.Header.Get("EPP-Profile")+" "+l.Path)
	}
	return out
}

func TestFlowEncodePrefillDecodeChat(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	p := phasePipeline(t, gw.URL, steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, p.Run(context.Background(), rc))

	// Gateway paths: every leg on the chat path, in phase order.
	assert.Equal(t, []string{
		"encode " + legs.PathChat, "encode " + legs.PathChat,
		"prefill " + legs.PathChat, "decode " + legs.PathChat,
	}, legTrail(gw))

	// EC params flow from the encoders to prefill, merged by hash.
	prefill := legsOf(gw, gateway.ProfilePrefill)[0]
	assert.JSONEq(t, fmt.Sprintf(`{%q:%s,%q:%s}`, hash0, descriptor(hash0), hash1, descriptor(hash1)),
		string(rawMember(t, prefill.Body, "ec_transfer_params")))

	// KV params flow from prefill to decode: every field the worker sent,
	// byte for byte, with the flags turned around; no EC params on decode.
	decode := legsOf(gw, gateway.ProfileDecode)[0]
	kvDecode := decoded(t, rawMember(t, decode.Body, "kv_transfer_params"))
	want := decoded(t, []byte(prefillKV))
	want["do_remote_decode"], want["do_remote_prefill"] = false, true
	assert.Equal(t, want, kvDecode)
	assert.Equal(t, []any{"1", "2", "4"}, kvDecode["remote_block_ids"], "block ids never re-typed (D15)")
	assert.NotContains(t, string(decode.Body), "ec_transfer_params")
	assert.Equal(t, decodeAnswer, string(rc.Sink.(*steptest.Sink).Body))
}

func TestFlowPartialECResponse(t *testing.T) {
	t.Parallel()
	// Only the first image's encoder reports a descriptor.
	gw := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("EPP-Profile") {
		case gateway.ProfileEncode:
			if h := legHash(bodyOf(r)); h == hash0 {
				_, _ = w.Write([]byte(encodeAnswer(h)))
				return
			}
			_, _ = w.Write([]byte(`{"id":"x","ec_transfer_params":null}`))
		case gateway.ProfilePrefill:
			_, _ = w.Write([]byte(`{"kv_transfer_params":` + prefillKV + `}`))
		default:
			_, _ = w.Write([]byte(decodeAnswer))
		}
	})
	rc := mmChatContext()
	p := phasePipeline(t, gw.URL, steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: false})
	require.NoError(t, p.Run(context.Background(), rc))

	require.Len(t, rc.ECDescriptors, 2)
	assert.Nil(t, rc.ECDescriptors[1])
	prefill := legsOf(gw, gateway.ProfilePrefill)[0]
	assert.Equal(t, legs.PathGenerate, prefill.Path)
	ecParams, _ := at(decoded(t, prefill.Body), "sampling_params", "extra_args", "ec_transfer_params").(map[string]any)
	assert.Equal(t, []string{hash0}, memberNames(ecParams), "only the reported hash is forwarded")
	// Decode still shapes for the client's chat API (D1).
	decode := legsOf(gw, gateway.ProfileDecode)[0]
	assert.Equal(t, legs.PathChat, decode.Path)
	assert.Equal(t, "e1101616", at(decoded(t, decode.Body), "kv_transfer_params", "remote_engine_id"))
}

func TestFlowNoECParamsAtAll(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("EPP-Profile") == gateway.ProfileEncode {
			_, _ = w.Write([]byte(`{"choices":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	rc := mmChatContext()
	p := phasePipeline(t, gw.URL, steps.Defaults{ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, p.Run(context.Background(), rc))
	assert.Equal(t, []json.RawMessage{nil, nil}, rc.ECDescriptors)
	assert.NotContains(t, string(legsOf(gw, gateway.ProfilePrefill)[0].Body), "ec_transfer_params")
}

// TestFlowAllConnectorCombinations follows the reference's integration
// test: tokens-in encode and prefill for a chat request, for each pair of
// connectors.
func TestFlowAllConnectorCombinations(t *testing.T) {
	t.Parallel()
	for _, kvName := range []string{"kv-nixl", "kv-sglang", "kv-shared-storage"} {
		for _, ecName := range []string{"ec-nixl", "ec-shared-storage"} {
			t.Run(kvName+"/"+ecName, func(t *testing.T) {
				t.Parallel()
				gw := workers(t)
				rc := mmChatContext()
				p := phasePipeline(t, gw.URL, steps.Defaults{KVConnector: kvName, ECConnector: ecName, UseOpenAIFormat: false})
				require.NoError(t, p.Run(context.Background(), rc))
				assert.Equal(t, decodeAnswer, string(rc.Sink.(*steptest.Sink).Body))
				assert.Len(t, rc.ECDescriptors, 2, "encoders' answers are kept whatever the connector")
				prefillLeg := legsOf(gw, gateway.ProfilePrefill)[0]
				assert.Equal(t, prefillKVFor(prefillLeg.Body), string(rc.PD.KVParams))
				prefill := decoded(t, prefillLeg.Body)
				assert.Equal(t, ecName == "ec-nixl", hasKey(prefill, "sampling_params", "extra_args", "ec_transfer_params"))
				assert.Equal(t, true, at(prefill, "sampling_params", "extra_args", "kv_transfer_params", "do_remote_decode"))
			})
		}
	}
}

func TestFlowTextOnlySkipsEncode(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Body = []byte(`{"model":"llava","messages":[{"role":"user","content":"Hi"}]}`)
	rc.Tokens, rc.Multimodal = requestbody.NewTokens([]uint32{1, 15043}), nil
	p := phasePipeline(t, gw.URL, steps.Defaults{ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, p.Run(context.Background(), rc))
	assert.Equal(t, []string{"prefill " + legs.PathChat, "decode " + legs.PathChat}, legTrail(gw))
	assert.Nil(t, rc.ECDescriptors)
}

func TestFlowGatewayPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rc        func() *steps.RequestContext
		useOpenAI bool
		want      []string
	}{
		{
			name: "completions preserved when openai format is disabled",
			rc:   func() *steps.RequestContext { return completionsContext(`"Hello"`, []uint32{1, 15043}) }, useOpenAI: false,
			want: []string{"prefill " + legs.PathCompletions, "decode " + legs.PathCompletions},
		},
		{
			name: "completions",
			rc:   func() *steps.RequestContext { return completionsContext(`"Hello"`, nil) }, useOpenAI: true,
			want: []string{"prefill " + legs.PathCompletions, "decode " + legs.PathCompletions},
		},
		{
			name: "generate skips encode",
			rc:   mmGenerateContext, useOpenAI: true,
			want: []string{"prefill " + legs.PathGenerate, "decode " + legs.PathGenerate},
		},
		{
			name: "chat tokens-in: encode and prefill on generate, decode on chat (D1)",
			rc:   mmChatContext, useOpenAI: false,
			want: []string{"encode " + legs.PathGenerate, "encode " + legs.PathGenerate, "prefill " + legs.PathGenerate, "decode " + legs.PathChat},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			p := phasePipeline(t, gw.URL, steps.Defaults{UseOpenAIFormat: tt.useOpenAI})
			require.NoError(t, p.Run(context.Background(), tt.rc()))
			assert.Equal(t, tt.want, legTrail(gw))
		})
	}
}

// TestFlowRenderToEncodeFeatures runs render → encode → prefill from a
// config: the encode and prefill legs carry the features render answered
// (hash, placeholder, tensor or the cache-hit null), tokens-in.
func TestFlowRenderToEncodeFeatures(t *testing.T) {
	t.Parallel()
	render := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"request_id":"chatcmpl-1","token_ids":[1,32000,32000,32000,32000,32000,32000,2345,6789],` +
			`"features":{"mm_hashes":{"image":["abc123hash","def456hash"]},` +
			`"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},` +
			`"kwargs_data":{"image":["dGVuc29yLTE=",null]}},"model":"llava","stream":false}`))
	})
	gw := workers(t)
	client := phaseClient(t, gw.URL)
	plugins := []steps.Plugin{builtin.NewRenderPlugin(builtin.RenderDeps{}), builtin.NewEncodePlugin(client, phaseECSet(t)), builtin.NewPrefillPlugin(client, phaseKVSet(t), phaseECSet(t))}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{
		{Type: builtin.RenderType, Params: map[string]any{"address": render.URL}},
		{Type: builtin.EncodeType},
		{Type: builtin.PrefillType},
	}, steps.Defaults{ECConnector: "ec-nixl", UseOpenAIFormat: false})
	require.NoError(t, err)
	rc := mmChatContext()
	rc.Tokens, rc.Multimodal = requestbody.NewTokens(nil), nil
	require.NoError(t, p.Run(context.Background(), rc))
	require.Len(t, render.Legs(), 1)

	encodeLegs := legsOf(gw, gateway.ProfileEncode)
	require.Len(t, encodeLegs, 2)
	assert.JSONEq(t, `{"mm_hashes":{"image":["abc123hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":["dGVuc29yLTE="]}}`,
		string(rawMember(t, legByHash(t, encodeLegs, hash0).Body, "features")))
	assert.JSONEq(t, `{"mm_hashes":{"image":["def456hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":[null]}}`,
		string(rawMember(t, legByHash(t, encodeLegs, hash1).Body, "features")))
	assert.JSONEq(t, `[1,32000,32000,32000]`, string(rawMember(t, legByHash(t, encodeLegs, hash1).Body, "token_ids")))

	prefill := legsOf(gw, gateway.ProfilePrefill)[0].Body
	assert.JSONEq(t, `{"mm_hashes":{"image":["abc123hash","def456hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},`+
		`"kwargs_data":{"image":["dGVuc29yLTE=",null]}}`, string(rawMember(t, prefill, "features")))
	assert.JSONEq(t, `[1,32000,32000,32000,32000,32000,32000,2345,6789]`, string(rawMember(t, prefill, "token_ids")))
}

// TestPrefillConnectorShapesPrefillBody is the reference's connector
// wiring test for the prefill leg.
func TestPrefillConnectorShapesPrefillBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kv   string
		want string
	}{
		{kv: "kv-nixl", want: `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`},
		{kv: "kv-shared-storage", want: `{"do_remote_decode":true,"do_remote_prefill":false}`},
		{kv: "kv-sglang", want: `{"do_remote_decode":true,"do_remote_prefill":false,"bootstrap_port":8998}`},
	}
	for _, tt := range tests {
		t.Run(tt.kv, func(t *testing.T) {
			t.Parallel()
			rc := mmChatContext()
			leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": tt.kv}, rc)
			body := leg.Body
			if tt.kv == "kv-sglang" {
				body = withoutSGLangRoom(t, body)
			}
			assert.JSONEq(t, tt.want, string(rawMember(t, body, "kv_transfer_params")))
		})
	}
}

func TestSGLangRoomIsFreshPerRequest(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	step := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true, "kv_connector": "kv-sglang"})
	for range 2 {
		require.NoError(t, step.Execute(context.Background(), mmChatContext()))
	}
	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 2)
	rooms := make([]any, 2)
	for i, l := range sentLegs {
		rooms[i] = at(decoded(t, l.Body), "kv_transfer_params", "bootstrap_room")
		withoutSGLangRoom(t, l.Body) // checks it is a UUID string
	}
	assert.NotEqual(t, rooms[0], rooms[1])
}

// rawMember returns a top-level member of a JSON body as raw JSON.
func rawMember(t *testing.T, body []byte, key string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	raw, ok := m[key]
	require.True(t, ok, "no %s in %s", key, body)
	return raw
}

func memberNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
