package builtin_test

import (
	"context"
	"net/http"
	"strings"
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

// Request side of D22: whatever asks for the prompt's logprobs goes to the
// prefill leg, never to the decode leg.

// pdGateway is a fake gateway: prefill legs get prefillAnswer (JSON),
// decode legs decodeAnswer with contentType.
func pdGateway(t *testing.T, prefillAnswer, contentType, decodeAnswer string) *steptest.Gateway {
	t.Helper()
	return steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("EPP-Profile") == gateway.ProfilePrefill {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(prefillAnswer))
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(decodeAnswer))
	})
}

// pdPrefillAnswer is a prefill answer carrying only KV params.
const pdPrefillAnswer = `{"choices":[{"index":0,"token_ids":[9]}],"kv_transfer_params":` + prefillKV + `}`

// runPD runs prefill then decode (kv-nixl) for rc against gw; the error is
// the pipeline's.
func runPD(t *testing.T, gw *steptest.Gateway, useOpenAI bool, rc *steps.RequestContext) error {
	t.Helper()
	client := phaseClient(t, gw.URL)
	kvs := phaseKVSet(t)
	p, err := steps.NewPipeline([]steps.Plugin{builtin.NewPrefillPlugin(client, kvs, phaseECSet(t)), builtin.NewDecodePlugin(client, kvs)},
		[]steps.StepConfig{{Type: builtin.PrefillType}, {Type: builtin.DecodeType}},
		steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: useOpenAI})
	require.NoError(t, err)
	return p.Run(context.Background(), rc)
}

// pdContext is a request of format f with body, token IDs 1..5.
func pdContext(f legs.Format, body string, stream bool) *steps.RequestContext {
	return &steps.RequestContext{
		RequestID: "req-pd-1",
		Format:    f,
		Header:    headers.NewForwarded("authorization", "Bearer t"),
		Body:      []byte(body),
		Model:     "m",
		Stream:    stream,
		Tokens:    requestbody.NewTokens([]uint32{1, 2, 3, 4, 5}),
		Sink:      &steptest.Sink{},
	}
}

func TestPDPromptLogprobsGoToPrefillOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		format    legs.Format
		useOpenAI bool
		body      string
		stream    bool
		// wantPrefill / wantDecode: JSON paths that must hold (path=value)
		// or be absent (path=).
		wantPrefill, wantDecode []string
	}{
		{name: "chat, prefill in the client's API", format: legs.FormatChat, useOpenAI: true,
			body:        `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_logprobs":2,"logprobs":true}`,
			wantPrefill: []string{"prompt_logprobs=2", "logprobs=true"},
			wantDecode:  []string{"prompt_logprobs=", "logprobs=true"}},
		{name: "chat, prefill tokens-in", format: legs.FormatChat, useOpenAI: false,
			body:        `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_logprobs":2}`,
			wantPrefill: []string{"sampling_params.prompt_logprobs=2", "sampling_params.max_tokens=1"},
			wantDecode:  []string{"prompt_logprobs="}},
		{name: "completions", format: legs.FormatCompletions, useOpenAI: true,
			body:        `{"model":"m","prompt":"hi","prompt_logprobs":0,"max_tokens":5}`,
			wantPrefill: []string{"prompt_logprobs=0", "max_tokens=1", "echo="},
			wantDecode:  []string{"prompt_logprobs=", "max_tokens=5"}},
		{name: "completions stream asking for none", format: legs.FormatCompletions, useOpenAI: true, stream: true,
			body:        `{"model":"m","prompt":"hi","prompt_logprobs":0,"stream":true}`,
			wantPrefill: []string{"prompt_logprobs=", "max_tokens=1"},
			wantDecode:  []string{"prompt_logprobs=", "stream=true"}},
		{name: "generate", format: legs.FormatGenerate, useOpenAI: true,
			body:        `{"model":"m","token_ids":[1,2,3,4,5],"sampling_params":{"max_tokens":7,"prompt_logprobs":3,"temperature":0.5}}`,
			wantPrefill: []string{"sampling_params.prompt_logprobs=3", "sampling_params.max_tokens=1"},
			wantDecode: []string{"sampling_params.prompt_logprobs=", "sampling_params.max_tokens=7",
				"sampling_params.temperature=0.5"}},
		{name: "generate stream", format: legs.FormatGenerate, useOpenAI: true, stream: true,
			body:        `{"model":"m","token_ids":[1,2,3,4,5],"sampling_params":{"prompt_logprobs":3},"stream":true}`,
			wantPrefill: []string{"sampling_params.prompt_logprobs="},
			wantDecode:  []string{"sampling_params.prompt_logprobs="}},
		{name: "completions echo with logprobs", format: legs.FormatCompletions, useOpenAI: true,
			body:        `{"model":"m","prompt":"hi","echo":true,"logprobs":2,"return_tokens_as_token_ids":true,"max_tokens":4}`,
			wantPrefill: []string{"echo=true", "logprobs=2", "max_tokens=0", "return_tokens_as_token_ids=true", "stream=false"},
			wantDecode:  []string{"echo=", "logprobs=2", "max_tokens=4", "return_tokens_as_token_ids=true"}},
		// vLLM reads "yes" as true: the decode leg must not compute the
		// prompt's logprobs again.
		{name: "completions echo spelled yes", format: legs.FormatCompletions, useOpenAI: true,
			body:        `{"model":"m","prompt":"hi","echo":"yes","logprobs":2,"max_tokens":4}`,
			wantPrefill: []string{"echo=true", "logprobs=2", "max_tokens=0"},
			wantDecode:  []string{"echo=", "logprobs=2", "max_tokens=4"}},
		{name: "completions echo without logprobs stays on decode", format: legs.FormatCompletions, useOpenAI: true,
			body:        `{"model":"m","prompt":"hi","echo":true}`,
			wantPrefill: []string{"echo=", "max_tokens=1"},
			wantDecode:  []string{"echo=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := pdGateway(t, pdPrefillAnswer, "application/json", `{"choices":[]}`)
			require.NoError(t, runPD(t, gw, tt.useOpenAI, pdContext(tt.format, tt.body, tt.stream)))
			prefill, decode := legsOf(gw, gateway.ProfilePrefill), legsOf(gw, gateway.ProfileDecode)
			require.Len(t, prefill, 1)
			require.Len(t, decode, 1)
			checkPaths(t, "prefill", prefill[0].Body, tt.wantPrefill)
			checkPaths(t, "decode", decode[0].Body, tt.wantDecode)
		})
	}
}

// checkPaths asserts "a.b=value" (JSON text) or "a.b=" (absent) on body.
func checkPaths(t *testing.T, leg string, body []byte, paths []string) {
	t.Helper()
	m := decoded(t, body)
	for _, p := range paths {
		path, want, _ := strings.Cut(p, "=")
		got := at(m, strings.Split(path, ".")...)
		if want == "" {
			assert.Nil(t, got, "%s leg: %s must be absent in %s", leg, path, body)
			continue
		}
		assert.Equal(t, want, jsonText(t, got), "%s leg: %s in %s", leg, path, body)
	}
}

func TestPDRefusesWhatOnlyAnAggregatedWorkerCouldAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		format     legs.Format
		stream     bool
		msg        string
	}{
		{name: "chat stream with prompt logprobs", format: legs.FormatChat, stream: true,
			body: `{"model":"m","messages":[],"prompt_logprobs":1,"stream":true}`, msg: "prompt_logprobs are not available when stream=True"},
		{name: "completions stream with all prompt logprobs", format: legs.FormatCompletions, stream: true,
			body: `{"model":"m","prompt":"x","prompt_logprobs":-1,"stream":true}`, msg: "prompt_logprobs are not available when stream=True"},
		{name: "echo scoring", format: legs.FormatCompletions,
			body: `{"model":"m","prompt":"x","echo":true,"logprobs":0,"max_tokens":0}`, msg: "max_tokens 0 needs a pipeline without a prefill step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := pdGateway(t, pdPrefillAnswer, "application/json", `{}`)
			err := runPD(t, gw, true, pdContext(tt.format, tt.body, tt.stream))
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.ErrorContains(t, err, tt.msg)
			assert.Empty(t, gw.Legs(), "refused before any leg")
		})
	}
}

func TestPDFallbackLeavesPromptLogprobsToDecode(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("EPP-Profile") == gateway.ProfilePrefill {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[],"prompt_logprobs":[null]}`))
	})
	client := phaseClient(t, gw.URL)
	kvs := phaseKVSet(t)
	p, err := steps.NewPipeline([]steps.Plugin{builtin.NewPrefillPlugin(client, kvs, phaseECSet(t)), builtin.NewDecodePlugin(client, kvs)},
		[]steps.StepConfig{{Type: builtin.PrefillType, Params: map[string]any{"fallback_to_decode": true}}, {Type: builtin.DecodeType}},
		steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, err)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_logprobs":2}`
	rc := pdContext(legs.FormatChat, body, false)
	rc.Tokens = requestbody.Tokens{} // nothing rendered: decode sends the client's bytes
	require.NoError(t, p.Run(context.Background(), rc))
	require.NotNil(t, rc.PD.Fallback)
	decode := legsOf(gw, gateway.ProfileDecode)
	require.Len(t, decode, 1)
	assert.Equal(t, body, string(decode[0].Body), "an aggregated decode computes the prompt logprobs itself")
	assert.Equal(t, `{"choices":[],"prompt_logprobs":[null]}`, string(rc.Sink.(*steptest.Sink).Body))
}

// TestPDPrefillGolden: the fresh prefill bodies that ask for the prompt's
// logprobs, under testdata/prefill/prompt-logprobs/.
func TestPDPrefillGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format legs.Format
		body   string
	}{
		{"completions", legs.FormatCompletions, `{"model":"m","prompt":"hi","prompt_logprobs":2,"max_tokens":5,"cache_salt":"s"}`},
		{"completions-echo", legs.FormatCompletions, `{"model":"m","prompt":"hi","echo":true,"logprobs":1,"prompt_logprobs":3,"return_tokens_as_token_ids":false}`},
		{"generate", legs.FormatGenerate, `{"model":"m","token_ids":[1,2,3,4,5],"sampling_params":{"max_tokens":7,"prompt_logprobs":3}}`},
		{"chat-tokens-in", legs.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_logprobs":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := pdGateway(t, pdPrefillAnswer, "application/json", `{}`)
			require.NoError(t, runPD(t, gw, false, pdContext(tt.format, tt.body, false)))
			prefill := legsOf(gw, gateway.ProfilePrefill)
			require.Len(t, prefill, 1)
			goldenJSON(t, "prefill/prompt-logprobs/"+tt.name, prefill[0].Body)
		})
	}
}
