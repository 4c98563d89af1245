package requestbody_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

func TestDropTransferParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		format  legs.Format
		body    string
		want    string // the body after the drop, byte for byte
		dropped []string
	}{
		{
			name:   "chat without params is untouched",
			format: legs.FormatChat,
			body:   `{"model":"m", "messages":[{"role":"user","content":"hi"}],"vllm_xargs":{"a":1}}`,
			want:   `{"model":"m", "messages":[{"role":"user","content":"hi"}],"vllm_xargs":{"a":1}}`,
		},
		{
			name:    "chat top-level kv and ec",
			format:  legs.FormatChat,
			body:    `{"model":"m","kv_transfer_params":{"remote_host":"10.0.0.1","remote_block_ids":[1]},"messages":[],"ec_transfer_params":{"x":1}}`,
			want:    `{"model":"m","messages":[]}`,
			dropped: []string{"kv_transfer_params", "ec_transfer_params"},
		},
		{
			name:    "an escaped key is the same key to a worker",
			format:  legs.FormatCompletions,
			body:    `{"prompt":"p","kv\u005ftransfer_params":{"do_remote_decode":true}}`,
			want:    `{"prompt":"p"}`,
			dropped: []string{"kv_transfer_params"},
		},
		{
			name:    "vllm_xargs, which vLLM copies into extra_args",
			format:  legs.FormatChat,
			body:    `{"messages":[],"vllm_xargs":{"keep":"me","kv_transfer_params":{"remote_host":"h"},"ec_transfer_params":{}}}`,
			want:    `{"messages":[],"vllm_xargs":{"keep":"me"}}`,
			dropped: []string{"vllm_xargs.kv_transfer_params", "vllm_xargs.ec_transfer_params"},
		},
		{
			name:    "generate: top level and sampling_params.extra_args (indexed)",
			format:  legs.FormatGenerate,
			body:    `{"token_ids":[1,2],"sampling_params":{"max_tokens":4,"extra_args":{"kv_transfer_params":{"remote_port":1},"k":2}},"kv_transfer_params":{}}`,
			want:    `{"token_ids":[1,2],"sampling_params":{"max_tokens":4,"extra_args":{"k":2}}}`,
			dropped: []string{"kv_transfer_params", "sampling_params.extra_args.kv_transfer_params"},
		},
		{
			name:    "chat: sampling_params.extra_args (not indexed)",
			format:  legs.FormatChat,
			body:    `{"messages":[],"sampling_params":{"extra_args":{"ec_transfer_params":{"h":1}}}}`,
			want:    `{"messages":[],"sampling_params":{"extra_args":{}}}`,
			dropped: []string{"sampling_params.extra_args.ec_transfer_params"},
		},
		{
			name:    "case variants: a Go worker decodes them as the key",
			format:  legs.FormatChat,
			body:    `{"messages":[],"KV_TRANSFER_PARAMS":{"remote_host":"h"},"Kv_Transfer_Params":1,"Ec_transfer_PARAMS":{},"kv_tranſfer_params":2}`,
			want:    `{"messages":[]}`,
			dropped: []string{"KV_TRANSFER_PARAMS", "Kv_Transfer_Params", "kv_tranſfer_params", "Ec_transfer_PARAMS"},
		},
		{
			name:    "case variants under vllm_xargs and its own variants",
			format:  legs.FormatCompletions,
			body:    `{"prompt":"p","vllm_xargs":{"KV_TRANSFER_PARAMS":{},"k":1},"VLLM_XARGS":{"kv_transfer_params":{}}}`,
			want:    `{"prompt":"p","vllm_xargs":{"k":1},"VLLM_XARGS":{}}`,
			dropped: []string{"vllm_xargs.KV_TRANSFER_PARAMS", "VLLM_XARGS.kv_transfer_params"},
		},
		{
			name:    "case variants under sampling_params.extra_args",
			format:  legs.FormatGenerate,
			body:    `{"token_ids":[1],"sampling_params":{"Extra_Args":{"EC_TRANSFER_PARAMS":{"h":1}},"extra_args":{"Kv_Transfer_Params":{}}}}`,
			want:    `{"token_ids":[1],"sampling_params":{"Extra_Args":{},"extra_args":{}}}`,
			dropped: []string{"sampling_params.Extra_Args.EC_TRANSFER_PARAMS", "sampling_params.extra_args.Kv_Transfer_Params"},
		},
		{
			name:   "a parent that is not an object is left alone",
			format: legs.FormatChat,
			body:   `{"messages":[],"vllm_xargs":"kv_transfer_params","sampling_params":null}`,
			want:   `{"messages":[],"vllm_xargs":"kv_transfer_params","sampling_params":null}`,
		},
		{
			name:   "a transfer key deeper down is the client's own",
			format: legs.FormatChat,
			body:   `{"messages":[{"role":"user","content":"x"}],"metadata":{"kv_transfer_params":1}}`,
			want:   `{"messages":[{"role":"user","content":"x"}],"metadata":{"kv_transfer_params":1}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tt.body)
			doc, err := requestbody.Parse(body, tt.format)
			require.NoError(t, err)
			assert.Equal(t, tt.dropped, doc.DropTransferParams())
			assert.Equal(t, tt.want, string(doc.Bytes()))
			if tt.dropped == nil {
				assert.False(t, doc.Root().Edited(), "a body without client params is written as it came")
			}
			assert.Nil(t, doc.DropTransferParams(), "a second drop finds nothing")
		})
	}
}

// A request without client transfer params pays no allocation for the
// check: it runs on every request.
func TestDropTransferParamsWithoutParamsAllocatesNothing(t *testing.T) {
	doc, err := requestbody.Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":8}`), legs.FormatChat)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if doc.DropTransferParams() != nil {
			t.Fatal("dropped")
		}
	})
	assert.Zero(t, allocs)
}
