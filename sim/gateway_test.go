package sim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Leg bodies as the coordinator sends them (compat §7.3-7.6).
const (
	prefillChatBody = `{"model":"sim-model","stream":false,"max_tokens":1,"messages":[{"role":"user","content":"hi"}],` +
		`"tokens":{"token_ids":[1,2,3]},"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,` +
		`"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`
	prefillCompletionsBody = `{"request_id":"r","model":"sim-model","prompt":[1,2,3],"max_tokens":1,"stream":false,` +
		`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false}}`
	prefillGenerateBody = `{"request_id":"r","model":"sim-model","token_ids":[1,2,3],"stream":false,` +
		`"sampling_params":{"max_tokens":1,"extra_args":{"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false}}}}`
	decodeChatNoKV   = `{"model":"sim-model","stream":false,"messages":[{"role":"user","content":"hi"}],"tokens":{"token_ids":[1,2,3]}}`
	decodeChatWithKV = `{"model":"sim-model","stream":false,"messages":[{"role":"user","content":"hi"}],"tokens":{"token_ids":[1,2,3]},` +
		`"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":"sim-prefill-0","remote_block_ids":[[1,2,3]]}}`
)

func wantKVAnswer(requestID string) string {
	return `{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[[1,2,3]],` +
		`"remote_engine_id":"sim-prefill-0","remote_request_id":"` + requestID + `",` +
		`"remote_host":"127.0.0.1","remote_port":5600,"tp_size":1}`
}

func TestGatewayPrefillAnswersKVParams(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	tests := []struct {
		name, path, body string
	}{
		{name: "chat", path: pathChat, body: prefillChatBody},
		{name: "completions", path: pathCompletions, body: prefillCompletionsBody},
		{name: "generate", path: pathGenerate, body: prefillGenerateBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "prefill-" + tc.name
			resp := post(t, e.gateway.URL+tc.path, legHeader("prefill", id), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := jsonOf[generateResp](t, resp.body)
			assert.JSONEq(t, wantKVAnswer(id), string(got.KVTransferParams))
			require.Len(t, got.Choices, 1)
			rec, ok := e.sim.prefilled.get(id)
			require.True(t, ok, "prefill remembered")
			assert.Equal(t, PrefillEngineID, rec.engineID)
			assert.Equal(t, tc.name == "chat", rec.forwarded, "kv-nixl fields mean decode must forward them")
		})
	}
}

func TestGatewayPrefillEchoesSGLangBootstrap(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	body := `{"model":"sim-model","prompt":[1],"max_tokens":1,"stream":false,` +
		`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"bootstrap_port":8998,"bootstrap_room":"room-1"}}`
	resp := post(t, e.gateway.URL+pathCompletions, legHeader("prefill", "sg-1"), body)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	kv := jsonOf[kvAnswer](t, jsonOf[chatResp](t, resp.body).KVTransferParams)
	assert.Equal(t, "127.0.0.1", kv.BootstrapHost)
	assert.JSONEq(t, "8998", string(kv.BootstrapPort))
	assert.JSONEq(t, `"room-1"`, string(kv.BootstrapRoom))
}

func TestGatewayStrictCappedRules(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	const msgs = `"messages":[],"tokens":{"token_ids":[1],"features":{"mm_hashes":{"image":["h"]}}}`
	const kv = `"kv_transfer_params":{"do_remote_decode":true}`
	tests := []struct {
		name, profile, path, body, wantMessage string
	}{
		{name: "prefill max_tokens missing", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"stream":false,` + kv + `}`, wantMessage: "sim: prefill leg must set max_tokens to 1"},
		{name: "prefill max_tokens 2", profile: "prefill", path: pathCompletions,
			body: `{"prompt":[1],"max_tokens":2,"stream":false,` + kv + `}`, wantMessage: "sim: prefill leg must set max_tokens to 1"},
		{name: "prefill generate max_tokens top level only", profile: "prefill", path: pathGenerate,
			body:        `{"token_ids":[1],"max_tokens":1,"stream":false,"sampling_params":{"extra_args":{` + kv + `}}}`,
			wantMessage: "sim: prefill leg must set max_tokens to 1"},
		{name: "prefill max_completion_tokens", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"max_completion_tokens":5,"stream":false,` + kv + `}`, wantMessage: "sim: prefill leg must set max_completion_tokens to 1 when present"},
		{name: "prefill max_output_tokens", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"max_output_tokens":5,"stream":false,` + kv + `}`, wantMessage: "sim: prefill leg must set max_output_tokens to 1 when present"},
		{name: "prefill min_tokens", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"min_tokens":3,"stream":false,` + kv + `}`, wantMessage: "sim: prefill leg must not carry min_tokens"},
		{name: "prefill generate min_tokens", profile: "prefill", path: pathGenerate,
			body:        `{"token_ids":[1],"stream":false,"sampling_params":{"max_tokens":1,"min_tokens":2,"extra_args":{` + kv + `}}}`,
			wantMessage: "sim: prefill leg must not carry min_tokens"},
		{name: "prefill stream missing", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,` + kv + `}`, wantMessage: "sim: prefill leg must set stream to false"},
		{name: "prefill stream true", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":true,` + kv + `}`, wantMessage: "sim: prefill leg must set stream to false"},
		{name: "prefill stream_options", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":false,"stream_options":{"include_usage":true},` + kv + `}`, wantMessage: "sim: prefill leg must not carry stream_options"},
		{name: "prefill without kv", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":false}`, wantMessage: "sim: prefill leg must carry kv_transfer_params with do_remote_decode true"},
		{name: "prefill kv not an object", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":false,"kv_transfer_params":"x"}`, wantMessage: "sim: prefill leg must carry kv_transfer_params"},
		{name: "prefill do_remote_decode false", profile: "prefill", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":false,"kv_transfer_params":{"do_remote_decode":false}}`, wantMessage: "sim: prefill leg must carry kv_transfer_params"},
		{name: "prefill generate kv at top level", profile: "prefill", path: pathGenerate,
			body:        `{"token_ids":[1],"stream":false,"sampling_params":{"max_tokens":1},` + kv + `}`,
			wantMessage: "sim: prefill leg must carry kv_transfer_params"},
		{name: "encode max_tokens", profile: "encode", path: pathChat,
			body: `{` + msgs + `,"stream":false}`, wantMessage: "sim: encode leg must set max_tokens to 1"},
		{name: "encode stream", profile: "encode", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":true}`, wantMessage: "sim: encode leg must set stream to false"},
		{name: "encode min_tokens", profile: "encode", path: pathChat,
			body: `{` + msgs + `,"max_tokens":1,"stream":false,"min_tokens":1}`, wantMessage: "sim: encode leg must not carry min_tokens"},
		{name: "encode without hashes", profile: "encode", path: pathChat,
			body: `{"messages":[],"max_tokens":1,"stream":false}`, wantMessage: "sim: encode leg must carry an image mm_hash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.gateway.URL+tc.path, legHeader(tc.profile, "rule-1"), tc.body)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			got := errorOf(t, resp.body)
			assert.Contains(t, got.Message, tc.wantMessage)
			assert.Equal(t, "BadRequestError", got.Type)
		})
	}
}

func TestGatewayDecodeAfterPrefill(t *testing.T) {
	t.Parallel()
	const sharedStoragePrefill = `{"model":"sim-model","stream":false,"max_tokens":1,"messages":[],` +
		`"tokens":{"token_ids":[1,2,3]},"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false}}`
	tests := []struct {
		name, prefill, decode string
		wantStatus            int
		wantMessage           string
	}{
		{name: "nixl without kv", prefill: prefillChatBody, decode: decodeChatNoKV, wantStatus: 400,
			wantMessage: "sim: decode leg after prefill must carry kv_transfer_params with do_remote_prefill true"},
		{name: "nixl do_remote_prefill false", prefill: prefillChatBody, wantStatus: 400,
			decode:      `{"messages":[],"kv_transfer_params":{"do_remote_prefill":false,"remote_engine_id":"sim-prefill-0"}}`,
			wantMessage: "sim: decode leg after prefill must carry kv_transfer_params with do_remote_prefill true"},
		{name: "nixl wrong engine", prefill: prefillChatBody, wantStatus: 400,
			decode:      `{"messages":[],"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"other"}}`,
			wantMessage: "sim: decode leg after prefill must carry the prefill's remote_engine_id"},
		{name: "nixl with kv", prefill: prefillChatBody, decode: decodeChatWithKV, wantStatus: 200},
		{name: "shared storage flags only", prefill: sharedStoragePrefill, wantStatus: 200,
			decode: `{"messages":[],"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true}}`},
		{name: "no prefill needs no kv", decode: decodeChatNoKV, wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := strictEnv(t)
			if tc.prefill != "" {
				resp := post(t, e.gateway.URL+pathChat, legHeader("prefill", "pd-1"), tc.prefill)
				require.Equal(t, http.StatusOK, resp.status, "prefill: %s", resp.body)
			}
			resp := post(t, e.gateway.URL+pathChat, legHeader("decode", "pd-1"), tc.decode)
			require.Equal(t, tc.wantStatus, resp.status, "decode: %s", resp.body)
			if tc.wantMessage != "" {
				assert.Equal(t, tc.wantMessage, errorOf(t, resp.body).Message)
				return
			}
			_, remembered := e.sim.prefilled.get("pd-1")
			assert.False(t, remembered, "a checked decode consumes the prefill record")
		})
	}
}

func TestGatewayDecodeGenerateKVInExtraArgs(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	resp := post(t, e.gateway.URL+pathGenerate, legHeader("prefill", "pdg-1"),
		`{"token_ids":[1,2],"stream":false,"sampling_params":{"max_tokens":1,"extra_args":{"kv_transfer_params":{"do_remote_decode":true,"remote_engine_id":null}}}}`)
	require.Equal(t, http.StatusOK, resp.status, "prefill: %s", resp.body)

	topLevel := `{"token_ids":[1,2],"sampling_params":{"max_tokens":2},"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"sim-prefill-0"}}`
	resp = post(t, e.gateway.URL+pathGenerate, legHeader("decode", "pdg-1"), topLevel)
	assert.Equal(t, http.StatusBadRequest, resp.status, "generate decode reads kv from extra_args: %s", resp.body)

	nested := `{"token_ids":[1,2],"sampling_params":{"max_tokens":2,"extra_args":{"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"sim-prefill-0"}}}}`
	resp = post(t, e.gateway.URL+pathGenerate, legHeader("decode", "pdg-1"), nested)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	assert.Equal(t, CompletionTokens([]uint32{1, 2}, 2, 0), jsonOf[generateResp](t, resp.body).Choices[0].TokenIDs)
}

func TestGatewayDecodeRejectsEC(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	for name, body := range map[string]string{
		"top level":  `{"messages":[],"ec_transfer_params":{"h":{}}}`,
		"extra_args": `{"token_ids":[1],"sampling_params":{"extra_args":{"ec_transfer_params":{"h":{}}}}}`,
	} {
		path := pathChat
		if name == "extra_args" {
			path = pathGenerate
		}
		resp := post(t, e.gateway.URL+path, legHeader("decode", "ec-1"), body)
		require.Equal(t, http.StatusBadRequest, resp.status, name)
		assert.Equal(t, "sim: decode leg must not carry ec_transfer_params", errorOf(t, resp.body).Message, name)
	}
}

func TestGatewayEncode(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	tests := []struct {
		name, path, body string
		wantHashes       map[string]int // hash → placeholder length
		wantIDField      string
	}{
		{
			name: "chat", path: pathChat, wantIDField: "id",
			body: `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],` +
				`"tokens":{"token_ids":[1,9,9,9],"features":{"mm_hashes":{"image":["abc"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]}}},"max_tokens":1,"stream":false}`,
			wantHashes: map[string]int{"abc": 3},
		},
		{
			name: "generate two hashes", path: pathGenerate, wantIDField: "request_id",
			body: `{"model":"sim-model","token_ids":[1,9,9],"features":{"mm_hashes":{"image":["h1","h2"]},` +
				`"mm_placeholders":{"image":[{"offset":1,"length":1},{"offset":2,"length":1}]},"kwargs_data":{"image":["dA==",null]}},` +
				`"sampling_params":{"max_tokens":1},"stream":false}`,
			wantHashes: map[string]int{"h1": 1, "h2": 1},
		},
		{
			name: "generate-shaped on completions", path: pathCompletions, wantIDField: "id",
			body: `{"model":"sim-model","token_ids":[1,9],"features":{"mm_hashes":{"image":["c1"]},` +
				`"mm_placeholders":{"image":[{"offset":1,"length":1}]}},"max_tokens":1,"stream":false}`,
			wantHashes: map[string]int{"c1": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.gateway.URL+tc.path, legHeader("encode", "enc-1"), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := jsonOf[map[string]any](t, resp.body)
			assert.Equal(t, []any{}, got["choices"])
			assert.Contains(t, got, tc.wantIDField)
			ec := jsonOf[map[string]ecDescriptor](t, []byte(mustJSON(t, got["ec_transfer_params"])))
			require.Len(t, ec, len(tc.wantHashes))
			for h, length := range tc.wantHashes {
				assert.Equal(t, ecDescriptor{
					PeerHost: "127.0.0.1", PeerPort: 5501, SizeBytes: ECDescriptorSize(length),
					NIXLAgentMetadataB64: mustBase64("sim-encode-0/" + h),
				}, ec[h], h)
			}
		})
	}
}

func TestGatewayConditionalDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, body, warmProfile, warmBody string
	}{
		{name: "served by decode", path: pathChat, body: decodeChatNoKV, warmProfile: "decode", warmBody: decodeChatNoKV},
		{name: "served by prefill", path: pathChat, body: decodeChatNoKV, warmProfile: "prefill", warmBody: prefillChatBody},
		{name: "completions ids", path: pathCompletions, body: `{"prompt":[1,2,3]}`, warmProfile: "prefill", warmBody: prefillCompletionsBody},
		{name: "generate", path: pathGenerate, body: `{"token_ids":[1,2,3],"sampling_params":{}}`, warmProfile: "decode",
			warmBody: `{"token_ids":[1,2,3],"sampling_params":{"max_tokens":2}}`},
		{name: "text prompt", path: pathCompletions, body: `{"prompt":"Hello"}`, warmProfile: "decode", warmBody: `{"prompt":"Hello","max_tokens":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := strictEnv(t)
			h := legHeader("decode", "cd-1")
			h.Set("Prefer", "respond-async, If-Available")
			resp := post(t, e.gateway.URL+tc.path, h, tc.body)
			require.Equal(t, http.StatusPreconditionFailed, resp.status, "body: %s", resp.body)
			assert.Equal(t, http.StatusPreconditionFailed, errorOf(t, resp.body).Code)

			resp = post(t, e.gateway.URL+tc.path, legHeader(tc.warmProfile, "cd-2"), tc.warmBody)
			require.Equal(t, http.StatusOK, resp.status, "warm: %s", resp.body)

			resp = post(t, e.gateway.URL+tc.path, h, tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		})
	}
}

func TestGatewayConditionalKeyIncludesModelAndPrompt(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, Models: []string{"a", "b"}})
	resp := post(t, e.gateway.URL+pathCompletions, legHeader("decode", "k-1"), `{"model":"a","prompt":[1,2],"max_tokens":1}`)
	require.Equal(t, http.StatusOK, resp.status)
	h := legHeader("decode", "k-2")
	h.Set("Prefer", "if-available")
	for body, want := range map[string]int{
		`{"model":"a","prompt":[1,2]}`:   200,
		`{"model":"b","prompt":[1,2]}`:   412,
		`{"model":"a","prompt":[1,2,3]}`: 412,
		`{"model":"a","prompt":"x"}`:     412,
	} {
		assert.Equal(t, want, post(t, e.gateway.URL+pathCompletions, h, body).status, body)
	}
}

func TestGatewayConditionalLegCarriesNoKV(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	h := legHeader("decode", "ckv-1")
	h.Set("Prefer", "if-available")
	resp := post(t, e.gateway.URL+pathChat, h, `{"messages":[],"kv_transfer_params":{"do_remote_prefill":true}}`)
	require.Equal(t, http.StatusBadRequest, resp.status)
	assert.Equal(t, "sim: conditional-decode leg must not carry kv_transfer_params", errorOf(t, resp.body).Message)
}

func TestPreferIfAvailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   bool
	}{
		{name: "absent"},
		{name: "exact", values: []string{"if-available"}, want: true},
		{name: "case", values: []string{"IF-AVAILABLE"}, want: true},
		{name: "list", values: []string{"respond-async, wait=10, if-available"}, want: true},
		{name: "parameters", values: []string{"if-available; foo=bar"}, want: true},
		{name: "second value", values: []string{"return=minimal", "if-available"}, want: true},
		{name: "other", values: []string{"return=minimal"}},
		{name: "substring only", values: []string{"if-available-later"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, preferIfAvailable(http.Header{"Prefer": tc.values}))
		})
	}
}

func TestGatewayHeaderRules(t *testing.T) {
	t.Parallel()
	const body = `{"messages":[]}`
	tests := []struct {
		name        string
		strict      bool
		header      http.Header
		wantStatus  int
		wantMessage string
	}{
		{name: "valid", strict: true, header: legHeader("decode", "ok-1"), wantStatus: 200},
		{name: "no profile means decode", strict: true, header: legHeader("", "ok-2"), wantStatus: 200},
		{name: "profile case-insensitive", strict: true, header: legHeader("Decode", "ok-3"), wantStatus: 200},
		{name: "missing request id", strict: true, header: legHeader("decode", ""), wantStatus: 400, wantMessage: "sim: " + ruleRequestID},
		{name: "invalid request id", strict: true, header: legHeader("decode", "a_b"), wantStatus: 400, wantMessage: "sim: " + ruleRequestID},
		{name: "request id too long", strict: true, header: legHeader("decode", string(make129())), wantStatus: 400, wantMessage: "sim: " + ruleRequestID},
		{name: "content type", strict: true, header: func() http.Header {
			h := legHeader("decode", "ct-1")
			h.Set("Content-Type", "text/plain")
			return h
		}(), wantStatus: 400, wantMessage: "sim: " + ruleContentType},
		{name: "content type with charset", strict: true, header: func() http.Header {
			h := legHeader("decode", "ct-2")
			h.Set("Content-Type", "application/json; charset=utf-8")
			return h
		}(), wantStatus: 200},
		{name: "unknown profile strict", strict: true, header: legHeader("prefil", "up-1"), wantStatus: 400, wantMessage: `sim: unknown EPP-Profile "prefil"`},
		{name: "unknown profile lenient", header: legHeader("prefil", "up-2"), wantStatus: 200},
		{name: "lenient missing id", header: legHeader("decode", ""), wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, Options{Strict: tc.strict, OutputTokens: 1})
			resp := post(t, e.gateway.URL+pathChat, tc.header, body)
			require.Equal(t, tc.wantStatus, resp.status, "body: %s", resp.body)
			if tc.wantMessage != "" {
				assert.Equal(t, tc.wantMessage, errorOf(t, resp.body).Message)
			}
		})
	}
}

func make129() []byte {
	b := make([]byte, 129)
	for i := range b {
		b[i] = 'a'
	}
	return b
}
