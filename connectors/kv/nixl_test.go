package kv_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/connectors/kv/kvtest"
)

// handOffCase is a decode params case for the connectors that hand the
// prefill worker's answer to the decode worker (kv-nixl, kv-sglang).
type handOffCase struct {
	name        string
	fromPrefill string // "" means nil
	want        string
}

var handOffCases = []handOffCase{
	{
		name: "no prefill answer",
		want: `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
	{
		name:        "null",
		fromPrefill: `null`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
	{
		name:        "empty object",
		fromPrefill: `{}`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
	{
		name:        "array is no answer",
		fromPrefill: `[{"remote_host":"10.0.0.1"}]`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
	{
		name:        "string is no answer",
		fromPrefill: `"remote"`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
	{
		name:        "vllm answer copied with flags flipped",
		fromPrefill: kvtest.VLLMAnswer,
		want: `{"do_remote_decode":false,"do_remote_prefill":true,
			"remote_block_ids":[[1,2,4]],"remote_engine_id":"e1101616-0d7c-4f3c-9a1e-1b2c3d4e5f60",
			"remote_request_id":"generate-tokens-abc123","remote_host":"10.0.0.42",
			"remote_port":5600,"tp_size":1,"remote_num_tokens":318}`,
	},
	{
		name:        "string block ids stay strings (D15)",
		fromPrefill: kvtest.SimulatorAnswer,
		want: `{"do_remote_decode":false,"do_remote_prefill":true,
			"remote_block_ids":["1","2","3"],"remote_engine_id":"sim-engine",
			"remote_host":"10.0.0.7","remote_port":5557}`,
	},
	{
		name:        "unknown fields kept",
		fromPrefill: `{"remote_engine_id":"e1","tp_size":2,"remote_num_tokens":318,"x":{"y":[1,{"z":null}]}}`,
		want: `{"do_remote_decode":false,"do_remote_prefill":true,
			"remote_engine_id":"e1","tp_size":2,"remote_num_tokens":318,"x":{"y":[1,{"z":null}]}}`,
	},
	{
		name:        "null fields kept",
		fromPrefill: `{"remote_engine_id":null,"remote_block_ids":null}`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":null,"remote_block_ids":null}`,
	},
	{
		name:        "flags of another type replaced",
		fromPrefill: `{"do_remote_decode":"yes","do_remote_prefill":null,"remote_host":"h"}`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true,"remote_host":"h"}`,
	},
	{
		name:        "unflipped flags flipped",
		fromPrefill: `{"do_remote_decode":true,"do_remote_prefill":false}`,
		want:        `{"do_remote_decode":false,"do_remote_prefill":true}`,
	},
}

// verbatimAnswer has values whose bytes a decode-and-re-encode would change.
const verbatimAnswer = `{ "big": 12345678901234567891, "f": 1.50, "e": 1e3,
	"esc": "\u00e9", "html": "a<b&c", "remote_block_ids": [ "7", 8 ] }`

// verbatimWant is verbatimAnswer compacted, keys sorted, flags added.
const verbatimWant = `{"big":12345678901234567891,"do_remote_decode":false,"do_remote_prefill":true,` +
	`"e":1e3,"esc":"\u00e9","f":1.50,"html":"a<b&c","remote_block_ids":["7",8]}`

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestNIXLContract(t *testing.T) {
	t.Parallel()
	kvtest.Contract(t, kv.NewNIXL(), json.RawMessage(kvtest.SimulatorAnswer))
}

func TestNIXLName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "kv-nixl", kv.NewNIXL().Name())
}

func TestNIXLPrefillParams(t *testing.T) {
	t.Parallel()
	got, err := kv.NewNIXL().PrefillParams()
	require.NoError(t, err)
	assert.JSONEq(t, `{"do_remote_decode":true,"do_remote_prefill":false,
		"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`, string(got))
}

func TestNIXLDecodeParams(t *testing.T) {
	t.Parallel()
	for _, tc := range handOffCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kv.NewNIXL().DecodeParams(raw(tc.fromPrefill))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestNIXLDecodeParamsVerbatim(t *testing.T) {
	t.Parallel()
	got, err := kv.NewNIXL().DecodeParams(json.RawMessage(verbatimAnswer))
	require.NoError(t, err)
	assert.Equal(t, verbatimWant, string(got))
}

func TestNIXLDecodeParamsMalformed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		fromPrefill string
	}{
		{"truncated", `{"remote_host":`},
		{"trailing garbage", `{"remote_host":"h"}x`},
		{"bare word", `remote`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := kv.NewNIXL().DecodeParams(json.RawMessage(tc.fromPrefill))
			assert.ErrorContains(t, err, "kv_transfer_params: prefill answer")
		})
	}
}

func TestNIXLMissingParams(t *testing.T) {
	t.Parallel()
	all := []string{"remote_engine_id", "remote_block_ids", "remote_host", "remote_port"}
	for _, tc := range []struct {
		name        string
		fromPrefill string
		want        []string
	}{
		{name: "vllm answer", fromPrefill: kvtest.VLLMAnswer},
		{name: "simulator answer, no remote_request_id nor tp_size", fromPrefill: kvtest.SimulatorAnswer},
		{name: "no answer", want: all},
		{name: "flags only", fromPrefill: `{"do_remote_prefill":true,"do_remote_decode":false}`, want: all},
		{name: "own placeholders echoed", fromPrefill: `{"do_remote_decode":true,"do_remote_prefill":false,` +
			`"remote_block_ids":null,"remote_engine_id":null,"remote_host":null,"remote_port":null}`, want: all},
		{name: "no host nor port", fromPrefill: `{"remote_engine_id":"e","remote_block_ids":[[1]]}`,
			want: []string{"remote_host", "remote_port"}},
		{name: "empty values are values", fromPrefill: `{"remote_engine_id":"","remote_block_ids":[],"remote_host":"","remote_port":0}`},
		{name: "malformed", fromPrefill: `{"remote_host":`, want: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, kv.NewNIXL().MissingParams(raw(tc.fromPrefill)))
		})
	}
}
