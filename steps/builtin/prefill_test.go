package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

func TestPrefillParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{name: "no params: default connectors"},
		{name: "every connector pair", params: map[string]any{"use_openai_format": false, "kv_connector": "kv-sglang", "ec_connector": "ec-nixl"}},
		{name: "empty names mean the defaults", params: map[string]any{"kv_connector": "", "ec_connector": ""}},
		{name: "unknown kv connector", params: map[string]any{"kv_connector": "kv-bogus"}, wantErr: `unknown kv_connector: "kv-bogus" (known: kv-nixl, kv-sglang, kv-shared-storage)`},
		{name: "unknown ec connector", params: map[string]any{"ec_connector": "ec-bogus"}, wantErr: `unknown ec_connector: "ec-bogus" (known: ec-nixl, ec-shared-storage)`},
		{name: "kv connector not a string", params: map[string]any{"kv_connector": 1}, wantErr: "kv_connector: expected string, got int"},
		{name: "ec connector not a string", params: map[string]any{"ec_connector": true}, wantErr: "ec_connector: expected string, got bool"},
		{name: "use_openai_format string", params: map[string]any{"use_openai_format": "false"}, wantErr: "use_openai_format: expected bool, got string"},
		{name: "use_openai_format number", params: map[string]any{"use_openai_format": 1}, wantErr: "use_openai_format: expected bool, got int"},
		{name: "unknown key", params: map[string]any{"max_parallel": 2}, wantErr: `unknown key "max_parallel"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewPrefillPlugin(phaseClient(t, "http://127.0.0.1:1"), phaseKVSet(t), phaseECSet(t)).New(tt.params)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, step)
		})
	}
}

// ecDescriptors are what two encoders answered for mmEntries.
func ecDescriptors() []json.RawMessage {
	return []json.RawMessage{
		json.RawMessage(`{"` + hash0 + `":` + descriptor(hash0) + `}`),
		json.RawMessage(`{"` + hash1 + `":` + descriptor(hash1) + `}`),
	}
}

// mmGenerateContext is a tokens-in request with two images.
func mmGenerateContext() *steps.RequestContext {
	rc := mmChatContext()
	rc.Format = legs.FormatGenerate
	rc.Body = []byte(`{"model":"llava","token_ids":[1,32000,32000,32000,32000,32000,32000,2345,6789],` +
		`"sampling_params":{"max_tokens":50,"min_tokens":3,"temperature":0.7},"stream":true}`)
	rc.Stream = true
	return rc
}

// completionsContext is a completions request: prompt is the raw JSON
// prompt, ids the rendered tokens (nil when render did not run).
func completionsContext(prompt string, ids []uint32) *steps.RequestContext {
	return &steps.RequestContext{
		RequestID: "req-abc-123",
		Format:    legs.FormatCompletions,
		Header:    headers.NewForwarded("authorization", "Bearer t", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
		Body:      []byte(`{"model":"llama","prompt":` + prompt + `,"max_tokens":64,"min_tokens":4,"stream":true,"temperature":0.2}`),
		Model:     "llama",
		Stream:    true,
		Tokens:    requestbody.NewTokens(ids),
		Sink:      &steptest.Sink{},
	}
}

// runPrefill runs a prefill step against workers and returns its one leg.
func runPrefill(t *testing.T, params map[string]any, rc *steps.RequestContext) steptest.Leg {
	t.Helper()
	gw := workers(t)
	require.NoError(t, newPrefill(t, gw.URL, params).Execute(context.Background(), rc))
	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 1)
	assertLegHeaders(t, sentLegs[0], gateway.ProfilePrefill, rc.RequestID)
	assert.True(t, rc.PD.Done)
	assert.Equal(t, prefillKVFor(sentLegs[0].Body), string(rc.PD.KVParams), "the worker's kv_transfer_params byte for byte (D15)")
	return sentLegs[0]
}

func TestPrefillGenerateRequest(t *testing.T) {
	t.Parallel()
	rc := mmGenerateContext()
	rc.ECDescriptors = ecDescriptors()
	leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": "kv-nixl", "ec_connector": "ec-nixl"}, rc)

	assert.Equal(t, legs.PathGenerate, leg.Path)
	body := decoded(t, leg.Body)
	assert.Equal(t, "req-abc-123", body["request_id"])
	assert.Equal(t, "llava", body["model"])
	assert.Len(t, body["token_ids"], 9)
	assert.Equal(t, []any{hash0, hash1}, at(body, "features", "mm_hashes", "image"))
	assert.Contains(t, string(leg.Body), `"kwargs_data":{"image":["dGVuc29yLTE=",null]}`)
	assert.Equal(t, map[string]any{"max_tokens": json.Number("1"), "extra_args": at(body, "sampling_params", "extra_args")}, body["sampling_params"],
		"client sampling params are not carried to prefill")
	assert.Equal(t, true, at(body, "sampling_params", "extra_args", "kv_transfer_params", "do_remote_decode"))
	ecParams, _ := at(body, "sampling_params", "extra_args", "ec_transfer_params").(map[string]any)
	assert.Len(t, ecParams, 2)
	assert.Equal(t, false, body["stream"])
	assert.False(t, hasKey(body, "kv_transfer_params"))
	assert.False(t, hasKey(body, "ec_transfer_params"))
}

func TestPrefillCompletions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		prompt     string
		ids        []uint32
		wantPrompt string
	}{
		{name: "rendered tokens replace the prompt", prompt: `"Hello"`, ids: []uint32{1, 15043, 4294967295}, wantPrompt: `[1,15043,4294967295]`},
		{name: "no rendered tokens keep the prompt", prompt: `"Hello"`, wantPrompt: `"Hello"`},
		{name: "client prompt bytes kept", prompt: `"caf\u00e9 \n"`, wantPrompt: `"caf\u00e9 \n"`},
		{name: "client token prompt kept", prompt: `[ 1, 2.0 ]`, wantPrompt: `[ 1, 2.0 ]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := completionsContext(tt.prompt, tt.ids)
			leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": "kv-nixl"}, rc)
			assert.Equal(t, legs.PathCompletions, leg.Path)
			assert.Contains(t, string(leg.Body), `"prompt":`+tt.wantPrompt+`,`)
			body := decoded(t, leg.Body)
			assert.Equal(t, "req-abc-123", body["request_id"])
			assert.Equal(t, "llama", body["model"])
			assert.Equal(t, json.Number("1"), body["max_tokens"])
			assert.Equal(t, false, body["stream"])
			assert.Equal(t, true, at(body, "kv_transfer_params", "do_remote_decode"))
			for _, k := range []string{"token_ids", "min_tokens", "temperature", "features", "ec_transfer_params", "tokens", "sampling_params"} {
				assert.False(t, hasKey(body, k), k)
			}
		})
	}
}

func TestPrefillCompletionsWithoutPromptSendsNull(t *testing.T) {
	t.Parallel()
	rc := completionsContext(`"x"`, nil)
	rc.Body = []byte(`{"model":"llama"}`)
	leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": "kv-nixl"}, rc)
	assert.Contains(t, string(leg.Body), `"prompt":null`)
}

func TestPrefillChat(t *testing.T) {
	t.Parallel()
	rc := mmChatContext()
	rc.ECDescriptors = ecDescriptors()
	leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": "kv-nixl", "ec_connector": "ec-nixl"}, rc)

	assert.Equal(t, legs.PathChat, leg.Path)
	body := decoded(t, leg.Body)
	assert.Equal(t, "llava", body["model"])
	assert.Equal(t, at(decoded(t, []byte(mmChatBody)), "messages"), body["messages"], "messages kept")
	assert.Equal(t, json.Number("5"), body["top_k"], "client fields kept")
	assert.Len(t, at(body, "tokens", "token_ids"), 9)
	assert.Equal(t, []any{hash0, hash1}, at(body, "tokens", "features", "mm_hashes", "image"))
	assert.False(t, hasKey(body, "tokens", "features", "kwargs_data"))
	ecParams, _ := body["ec_transfer_params"].(map[string]any)
	assert.Len(t, ecParams, 2)
	assert.Equal(t, true, at(body, "kv_transfer_params", "do_remote_decode"))
	assert.False(t, hasKey(body, "token_ids"))
	assert.False(t, hasKey(body, "request_id"))
	assert.False(t, hasKey(body, "features"))
}

// TestPrefillChatEditsOnlyOwnedKeys pins the exact bytes: members the step
// does not own keep their position, spelling and inner whitespace.
func TestPrefillChatEditsOnlyOwnedKeys(t *testing.T) {
	t.Parallel()
	rc := mmChatContext()
	rc.Body = []byte(`{"model":"m","messages":[ {"role":"user","content":"caf\u00e9"} ],"stream":true,"temperature":1.0E0,` +
		`"kv_transfer_params":{"client":true},"min_tokens":3,"stream_options":{"include_usage":true},"max_completion_tokens":64}`)
	rc.Tokens = requestbody.NewTokens([]uint32{1, 2, 3})
	rc.Multimodal = nil
	leg := runPrefill(t, map[string]any{"use_openai_format": true, "kv_connector": "kv-shared-storage", "ec_connector": "ec-nixl"}, rc)
	assert.Equal(t, `{"model":"m","messages":[ {"role":"user","content":"caf\u00e9"} ],"stream":false,"temperature":1.0E0,`+
		`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false},"max_completion_tokens":1,`+
		`"max_tokens":1,"tokens":{"token_ids":[1,2,3]}}`, string(leg.Body))
}

func TestPrefillChatCapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		check  func(t *testing.T, body map[string]any)
		absent []string
	}{
		{
			name: "forces non-streaming",
			body: `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			check: func(t *testing.T, body map[string]any) {
				assert.Equal(t, false, body["stream"])
			},
			absent: []string{"stream_options"},
		},
		{
			name: "caps max_completion_tokens",
			body: `{"model":"m","messages":[],"max_completion_tokens":100}`,
			check: func(t *testing.T, body map[string]any) {
				assert.Equal(t, json.Number("1"), body["max_completion_tokens"])
				assert.Equal(t, json.Number("1"), body["max_tokens"])
			},
		},
		{
			name: "caps max_output_tokens (D11)",
			body: `{"model":"m","messages":[],"max_output_tokens":100}`,
			check: func(t *testing.T, body map[string]any) {
				assert.Equal(t, json.Number("1"), body["max_output_tokens"])
			},
			absent: []string{"max_completion_tokens"},
		},
		{
			name: "strips client min_tokens",
			body: `{"model":"m","messages":[],"max_tokens":100,"min_tokens":10}`,
			check: func(t *testing.T, body map[string]any) {
				assert.Equal(t, json.Number("1"), body["max_tokens"])
			},
			absent: []string{"min_tokens"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := mmChatContext()
			rc.Body = []byte(tt.body)
			leg := runPrefill(t, map[string]any{"use_openai_format": true}, rc)
			body := decoded(t, leg.Body)
			tt.check(t, body)
			for _, k := range tt.absent {
				assert.False(t, hasKey(body, k), k)
			}
		})
	}
}

// TestPrefillChatWithoutTokens: without rendered token IDs the leg carries
// no "tokens" (decision D3), rather than token_ids: null.
func TestPrefillChatWithoutTokens(t *testing.T) {
	t.Parallel()
	rc := mmChatContext()
	rc.Tokens, rc.Multimodal = requestbody.NewTokens(nil), nil
	leg := runPrefill(t, map[string]any{"use_openai_format": true}, rc)
	assert.False(t, hasKey(decoded(t, leg.Body), "tokens"))
}

func TestPrefillSharedStorageOmitsECTransferParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rc        func() *steps.RequestContext
		useOpenAI bool
	}{
		{name: "chat", rc: mmChatContext, useOpenAI: true},
		{name: "chat tokens-in", rc: mmChatContext, useOpenAI: false},
		{name: "completions", rc: func() *steps.RequestContext { return completionsContext(`"Hello"`, []uint32{1, 2}) }, useOpenAI: true},
		{name: "generate", rc: mmGenerateContext, useOpenAI: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := tt.rc()
			rc.ECDescriptors = ecDescriptors()
			leg := runPrefill(t, map[string]any{"use_openai_format": tt.useOpenAI, "ec_connector": "ec-shared-storage"}, rc)
			assert.NotContains(t, string(leg.Body), "ec_transfer_params")
		})
	}
}

func TestPrefillConflictingECParamsRejectsTheRequest(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.ECDescriptors = []json.RawMessage{
		json.RawMessage(`{"` + hash0 + `":{"peer_host":"10.0.0.1"}}`),
		json.RawMessage(`{"` + hash0 + `":{"peer_host":"10.0.0.2"}}`),
	}
	err := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true, "ec_connector": "ec-nixl"}).Execute(context.Background(), rc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `conflicting descriptors for mm_hash "abc123hash"`)
	assert.NotErrorIs(t, err, legs.ErrInvalidRequest, "a 502, not a client error")
	var se *gateway.StatusError
	assert.NotErrorAs(t, err, &se)
	assert.Empty(t, gw.Legs(), "the gateway is never hit")
	assert.False(t, rc.PD.Done)
}

func TestPrefillGatewayError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
	}{
		{name: "unavailable", status: http.StatusServiceUnavailable},
		{name: "rate limited", status: http.StatusTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(`{"error":"busy"}`))
			})
			rc := mmChatContext()
			err := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
			var se *gateway.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "prefill", se.Leg)
			assert.Equal(t, tt.status, se.StatusCode)
			assert.False(t, se.Relay)
			assert.False(t, rc.PD.Done)
			assert.Nil(t, rc.PD.KVParams)
		})
	}
}

// TestPrefillKVTransferParamsAnswers is the reference's
// CoercesInvalidKVTransferParams, with an empty object kept as an object.
func TestPrefillKVTransferParamsAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		answer  string
		want    string // "" means nil
		wantErr bool
	}{
		{name: "object kept byte for byte", status: 200, answer: `{"kv_transfer_params":{"remote_block_ids":["1", "2"],"tp_size":2.0}}`, want: `{"remote_block_ids":["1", "2"],"tp_size":2.0}`},
		{name: "empty object stays an object", status: 200, answer: `{"kv_transfer_params":{}}`, want: `{}`},
		{name: "string", status: 200, answer: `{"kv_transfer_params":"x"}`},
		{name: "array", status: 200, answer: `{"kv_transfer_params":[1]}`},
		{name: "null", status: 200, answer: `{"kv_transfer_params":null}`},
		{name: "absent", status: 200, answer: `{"choices":[]}`},
		{name: "accepted (D9)", status: 202, answer: `{"kv_transfer_params":{"a":1}}`, want: `{"a":1}`},
		{name: "no content (D9)", status: 204},
		{name: "streamed answer", status: 200, answer: "data: {\"kv_transfer_params\":{}}\n\ndata: [DONE]\n\n", wantErr: true},
		{name: "truncated", status: 200, answer: `{"kv_transfer_params":{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.answer))
			})
			rc := mmChatContext()
			err := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "prefill: decode answer")
				assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
				assert.False(t, rc.PD.Done)
				return
			}
			require.NoError(t, err)
			assert.True(t, rc.PD.Done)
			if tt.want == "" {
				assert.Nil(t, rc.PD.KVParams)
				return
			}
			assert.Equal(t, tt.want, string(rc.PD.KVParams))
		})
	}
}

func TestPrefillPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rc        func() *steps.RequestContext
		useOpenAI bool
		wantPath  string
	}{
		{name: "chat", rc: mmChatContext, useOpenAI: true, wantPath: legs.PathChat},
		{name: "chat tokens-in", rc: mmChatContext, useOpenAI: false, wantPath: legs.PathGenerate},
		{name: "completions", rc: func() *steps.RequestContext { return completionsContext(`"Hi"`, nil) }, useOpenAI: true, wantPath: legs.PathCompletions},
		{name: "completions stays completions", rc: func() *steps.RequestContext { return completionsContext(`"Hi"`, nil) }, useOpenAI: false, wantPath: legs.PathCompletions},
		{name: "generate", rc: mmGenerateContext, useOpenAI: true, wantPath: legs.PathGenerate},
		{name: "generate tokens-in", rc: mmGenerateContext, useOpenAI: false, wantPath: legs.PathGenerate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			leg := runPrefill(t, map[string]any{"use_openai_format": tt.useOpenAI}, tt.rc())
			assert.Equal(t, tt.wantPath, leg.Path)
		})
	}
}

func TestPrefillRunsForTextOnly(t *testing.T) {
	t.Parallel()
	rc := mmChatContext()
	rc.Body = []byte(`{"model":"llava","messages":[{"role":"user","content":"Hi"}]}`)
	rc.Tokens, rc.Multimodal = requestbody.NewTokens([]uint32{1, 2}), nil
	leg := runPrefill(t, map[string]any{"use_openai_format": false}, rc)
	assert.Equal(t, `{"request_id":"req-abc-123","model":"llava","token_ids":[1,2],"sampling_params":{"max_tokens":1,`+
		`"extra_args":{"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false}}},"stream":false}`, string(leg.Body))
}

func TestPrefillRejectsABadChatBody(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Body = []byte(`"not an object"`)
	err := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
	assert.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.Empty(t, gw.Legs())
}

func TestPrefillClientCancellation(t *testing.T) {
	t.Parallel()
	in := make(chan struct{}, 1)
	gw := steptest.NewGateway(t, func(_ http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		<-r.Context().Done()
	})
	ctx, cancel := cancellable(t)
	step := newPrefill(t, gw.URL, map[string]any{"use_openai_format": true})
	rc := mmChatContext()
	done := make(chan error, 1)
	go func() { done <- step.Execute(ctx, rc) }()
	within(t, in, "prefill leg")
	cancel()
	assert.ErrorIs(t, within(t, done, "Execute after cancellation"), context.Canceled)
	assert.False(t, rc.PD.Done)
}

func TestPrefillCarriesTheClientsCacheSalt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		format legs.Format
		body   string
	}{
		{legs.FormatCompletions, `{"model":"m","prompt":[1,2],"cache_salt":"tenant-a"}`},
		{legs.FormatGenerate, `{"model":"m","token_ids":[1,2],"cache_salt":"tenant-a"}`},
		{legs.FormatChat, `{"model":"m","messages":[],"cache_salt":"tenant-a"}`},
	} {
		gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kv_transfer_params":{}}`))
		})
		step, err := builtin.NewPrefillPlugin(phaseClient(t, gw.URL), phaseKVSet(t), phaseECSet(t)).New(nil)
		require.NoError(t, err)
		rc := &steps.RequestContext{RequestID: "r", Format: tt.format, Model: "m", Body: []byte(tt.body), Tokens: requestbody.NewTokens([]uint32{1, 2})}
		require.NoError(t, step.Execute(context.Background(), rc))
		sentLegs := gw.Legs()
		require.Len(t, sentLegs, 1)
		assert.Contains(t, string(sentLegs[0].Body), `"cache_salt":"tenant-a"`, tt.format.String())
	}
}
