package builtin_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Decision D26: a prefill answer without the kv_transfer_params its KV
// connector needs is a prefill failure.

// prefillAnswering is a fake gateway whose prefill workers answer 200 with
// body and whose decode workers answer decodeAnswer.
func prefillAnswering(t *testing.T, body string) *recorder {
	t.Helper()
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("EPP-Profile") == gateway.ProfilePrefill {
			_, _ = w.Write([]byte(body))
			return
		}
		_, _ = w.Write([]byte(decodeAnswer))
	})
}

// connectorPipeline is prefill → decode with connector kvName.
func connectorPipeline(t *testing.T, url, kvName string, prefillParams map[string]any) *steps.Pipeline {
	t.Helper()
	kvs := phaseKVSet(t)
	client := phaseClient(t, url)
	plugins := []steps.Plugin{builtin.NewPrefillPlugin(client, kvs, phaseECSet(t)), builtin.NewDecodePlugin(client, kvs)}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: builtin.PrefillType, Params: prefillParams}, {Type: builtin.DecodeType}},
		steps.Defaults{KVConnector: kvName, UseOpenAIFormat: true})
	require.NoError(t, err)
	return p
}

var nixlFields = []string{"remote_engine_id", "remote_block_ids", "remote_host", "remote_port"}

func TestPrefillAnswerWithoutKVParamsFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, kv, answer string
		missing          []string
	}{
		{name: "nixl, no kv_transfer_params", kv: "kv-nixl", answer: `{"choices":[]}`, missing: nixlFields},
		{name: "nixl, null", kv: "kv-nixl", answer: `{"kv_transfer_params":null}`, missing: nixlFields},
		{name: "nixl, flags only", kv: "kv-nixl", answer: `{"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false}}`,
			missing: nixlFields},
		{name: "nixl, no host nor port", kv: "kv-nixl",
			answer:  `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[[1]],"remote_host":null}}`,
			missing: []string{"remote_host", "remote_port"}},
		{name: "nixl, 204", kv: "kv-nixl", answer: "", missing: nixlFields},
		{name: "sglang, no bootstrap host", kv: "kv-sglang",
			answer:  `{"kv_transfer_params":{"bootstrap_port":8998,"bootstrap_room":"r"}}`,
			missing: []string{"bootstrap_host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := prefillAnswering(t, tt.answer)
			if tt.answer == "" {
				gw = newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
			}
			rc := completionsContext(`"Hello"`, nil)
			err := connectorPipeline(t, gw.URL, tt.kv, nil).Run(context.Background(), rc)

			var ie *pd.IncompleteKVError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.missing, ie.Missing)
			assert.Equal(t, tt.kv, ie.Connector)
			assert.Equal(t, builtin.PrefillType, ie.Leg)
			assert.ErrorContains(t, err, "answer lacks kv_transfer_params "+tt.missing[0])
			assert.Equal(t, []string{gateway.ProfilePrefill}, profiles(gw), "decode never sent")
			assert.False(t, rc.PD.Done)
			assert.Nil(t, rc.PD.Fallback)
		})
	}
}

func TestPrefillAnswerWithoutKVParamsFallsBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rc   func() *steps.RequestContext
		kv   []string // where the decode body would carry kv_transfer_params
	}{
		{name: "chat", rc: mmChatContext, kv: []string{"kv_transfer_params"}},
		{name: "completions", rc: func() *steps.RequestContext { return completionsContext(`"Hello"`, nil) }, kv: []string{"kv_transfer_params"}},
		{name: "generate", rc: mmGenerateContext, kv: []string{"sampling_params", "extra_args", "kv_transfer_params"}},
		{name: "messages", rc: messagesContext, kv: []string{"kv_transfer_params"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := prefillAnswering(t, `{"choices":[],"kv_transfer_params":{"do_remote_prefill":true}}`)
			rc := tt.rc()
			require.NoError(t, connectorPipeline(t, gw.URL, "kv-nixl", fallbackOn).Run(context.Background(), rc))

			require.NotNil(t, rc.PD.Fallback)
			assert.Equal(t, pd.FallbackMissingKVParams, rc.PD.Fallback.Reason)
			var ie *pd.IncompleteKVError
			require.ErrorAs(t, rc.PD.Fallback.Err, &ie)
			assert.Equal(t, nixlFields, ie.Missing)
			assert.False(t, rc.PD.Done)
			assert.Nil(t, rc.PD.KVParams)
			assert.Equal(t, []string{gateway.ProfilePrefill, gateway.ProfileDecode}, profiles(gw))
			decode := legsOf(gw, gateway.ProfileDecode)[0]
			assert.Nil(t, at(decoded(t, decode.Body), tt.kv...), "decode serves alone, no bare do_remote_prefill")
			assert.NotContains(t, string(decode.Body), "do_remote_prefill")
			assert.Equal(t, decodeAnswer, string(rc.Sink.(*steptest.Sink).Body))
		})
	}
}

// TestPrefillSharedStorageNeedsNoKVParams: kv-shared-storage's decode
// worker reads the KV from storage, so an answer without kv_transfer_params
// is complete.
func TestPrefillSharedStorageNeedsNoKVParams(t *testing.T) {
	t.Parallel()
	gw := prefillAnswering(t, `{"choices":[]}`)
	rc := completionsContext(`"Hello"`, nil)
	require.NoError(t, connectorPipeline(t, gw.URL, "kv-shared-storage", nil).Run(context.Background(), rc))
	assert.True(t, rc.PD.Done)
	assert.Nil(t, rc.PD.Fallback)
	decode := legsOf(gw, gateway.ProfileDecode)[0]
	assert.JSONEq(t, `{"do_remote_decode":false,"do_remote_prefill":true}`, string(rawMember(t, decode.Body, "kv_transfer_params")))
}

// messagesContext is an Anthropic Messages request (text only).
func messagesContext() *steps.RequestContext {
	return &steps.RequestContext{
		RequestID: "req-abc-123",
		Format:    legs.FormatMessages,
		Body:      []byte(`{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`),
		Model:     "claude",
		Sink:      &steptest.Sink{},
	}
}
