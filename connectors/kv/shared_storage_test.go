package kv_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/connectors/kv/kvtest"
)

func TestSharedStorageContract(t *testing.T) {
	t.Parallel()
	kvtest.Contract(t, kv.NewSharedStorage(), json.RawMessage(`{}`))
}

func TestSharedStorageName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "kv-shared-storage", kv.NewSharedStorage().Name())
	assert.Equal(t, kv.SharedStorageName, kv.Default)
}

func TestSharedStoragePrefillParams(t *testing.T) {
	t.Parallel()
	got, err := kv.NewSharedStorage().PrefillParams()
	require.NoError(t, err)
	assert.JSONEq(t, `{"do_remote_decode":true,"do_remote_prefill":false}`, string(got))
}

func TestSharedStorageDecodeParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		fromPrefill string
	}{
		{"no prefill answer", ""},
		{"vllm answer ignored", kvtest.VLLMAnswer},
		{"simulator answer ignored", kvtest.SimulatorAnswer},
		{"malformed answer ignored", `{"remote_host":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kv.NewSharedStorage().DecodeParams(raw(tc.fromPrefill))
			require.NoError(t, err)
			assert.JSONEq(t, `{"do_remote_decode":false,"do_remote_prefill":true}`, string(got))
		})
	}
}

func TestSharedStorageMissingParams(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{"", `{}`, `null`, `{"remote_host":`, kvtest.VLLMAnswer} {
		assert.Nil(t, kv.NewSharedStorage().MissingParams(raw(answer)), "answer %q: the KV is in the shared storage", answer)
	}
}
