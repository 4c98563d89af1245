package jsonbody_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestNamesFold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"none", `{"a":1,"kv_transfer":2}`, nil},
		{"exact", `{"kv_transfer_params":{}}`, []string{"kv_transfer_params"}},
		{"case variants in order", `{"KV_TRANSFER_PARAMS":1,"x":0,"kv_transfer_params":2,"Kv_Transfer_Params":3}`,
			[]string{"KV_TRANSFER_PARAMS", "kv_transfer_params", "Kv_Transfer_Params"}},
		{"duplicates once", `{"KV_transfer_params":1,"KV_transfer_params":2}`, []string{"KV_transfer_params"}},
		{"escaped key", `{"kv_transfer_\u0050arams":1}`, []string{"kv_transfer_Params"}},
		// encoding/json folds these too: the long s is an s, the Kelvin sign a k.
		{"unicode folding", `{"kv_tranſfer_params":1,"\u212av_transfer_params":2}`, []string{"kv_tranſfer_params", "\u212av_transfer_params"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj, err := jsonbody.ParseObject([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, obj.NamesFold("kv_transfer_params"))
		})
	}
}

func TestNamesFoldDoesNotAllocateWithoutAMatch(t *testing.T) {
	obj, err := jsonbody.ParseObject([]byte(`{"model":"m","messages":[],"stream":true,"max_tokens":3}`))
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() { obj.NamesFold("kv_transfer_params") }))
}
