package kv_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/connectors/kv/kvtest"
)

func TestSGLangContract(t *testing.T) {
	t.Parallel()
	kvtest.Contract(t, kv.NewSGLang(kv.SGLangDefaultPort), json.RawMessage(kvtest.SGLangAnswer))
}

func TestSGLangName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "kv-sglang", kv.NewSGLang(kv.SGLangDefaultPort).Name())
}

func TestSGLangPrefillParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		port int
		want string // bootstrap_room left out
	}{
		{"default port", 8998, `{"bootstrap_port":8998,"do_remote_decode":true,"do_remote_prefill":false}`},
		{"configured port", 9100, `{"bootstrap_port":9100,"do_remote_decode":true,"do_remote_prefill":false}`},
		{"lowest port", 1, `{"bootstrap_port":1,"do_remote_decode":true,"do_remote_prefill":false}`},
		{"highest port", 65535, `{"bootstrap_port":65535,"do_remote_decode":true,"do_remote_prefill":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kv.NewSGLang(tc.port).PrefillParams()
			require.NoError(t, err)
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(got, &obj))

			var room string
			require.NoError(t, json.Unmarshal(obj["bootstrap_room"], &room), "bootstrap_room must be a string")
			id, err := uuid.Parse(room)
			require.NoError(t, err)
			assert.Equal(t, uuid.Version(4), id.Version())
			assert.Equal(t, uuid.RFC4122, id.Variant())

			delete(obj, "bootstrap_room")
			rest, err := json.Marshal(obj)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(rest))
		})
	}
}

func TestSGLangBootstrapRoomPerCall(t *testing.T) {
	t.Parallel()
	c := kv.NewSGLang(kv.SGLangDefaultPort)
	const calls = 100
	rooms := make(map[string]bool, calls)
	for range calls {
		got, err := c.PrefillParams()
		require.NoError(t, err)
		var p struct {
			BootstrapRoom string `json:"bootstrap_room"`
		}
		require.NoError(t, json.Unmarshal(got, &p))
		rooms[p.BootstrapRoom] = true
	}
	assert.Len(t, rooms, calls, "bootstrap_room repeated")
}

func TestSGLangDecodeParams(t *testing.T) {
	t.Parallel()
	cases := slices.Concat(handOffCases, []handOffCase{{
		name: "bootstrap fields echoed by the prefill worker kept",
		fromPrefill: `{"do_remote_decode":true,"do_remote_prefill":false,"bootstrap_host":"10.0.0.5",` +
			`"bootstrap_port":8998,"bootstrap_room":"6f1c1f54-3c0a-4d43-9a55-2f3f0f0c1d7e"}`,
		want: `{"do_remote_decode":false,"do_remote_prefill":true,"bootstrap_host":"10.0.0.5",` +
			`"bootstrap_port":8998,"bootstrap_room":"6f1c1f54-3c0a-4d43-9a55-2f3f0f0c1d7e"}`,
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kv.NewSGLang(9100).DecodeParams(raw(tc.fromPrefill))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestSGLangDecodeParamsVerbatim(t *testing.T) {
	t.Parallel()
	got, err := kv.NewSGLang(9100).DecodeParams(json.RawMessage(verbatimAnswer))
	require.NoError(t, err)
	assert.Equal(t, verbatimWant, string(got))
}

func TestSGLangPortFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int
		wantErr bool
	}{
		{name: "unset", env: map[string]string{}, want: 8998},
		{name: "empty", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": ""}, want: 8998},
		{name: "set", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "9100"}, want: 9100},
		{name: "default value", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "8998"}, want: 8998},
		{name: "lowest", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "1"}, want: 1},
		{name: "highest", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "65535"}, want: 65535},
		{name: "plus sign", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "+9100"}, want: 9100},
		{name: "trailing letter", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "9100x"}, wantErr: true},
		{name: "zero", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "0"}, wantErr: true},
		{name: "negative", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "-1"}, wantErr: true},
		{name: "too high", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "65536"}, wantErr: true},
		{name: "overflow", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "99999999999999999999"}, wantErr: true},
		{name: "word", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "abc"}, wantErr: true},
		{name: "hex", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "0x2329"}, wantErr: true},
		{name: "decimal point", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": "9100.0"}, wantErr: true},
		{name: "spaces", env: map[string]string{"SGLANG_BOOTSTRAP_PORT": " 9100"}, wantErr: true},
		{name: "other variable ignored", env: map[string]string{"MOONCAKE_BOOTSTRAP_PORT": "abc"}, want: 8998},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lookup := func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			}
			got, err := kv.SGLangPortFromEnv(lookup)
			if tc.wantErr {
				require.Error(t, err)
				assert.ErrorContains(t, err, "SGLANG_BOOTSTRAP_PORT")
				assert.ErrorContains(t, err, tc.env["SGLANG_BOOTSTRAP_PORT"])
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSGLangMissingParams(t *testing.T) {
	t.Parallel()
	all := []string{"bootstrap_host", "bootstrap_port", "bootstrap_room"}
	for _, tc := range []struct {
		name        string
		fromPrefill string
		want        []string
	}{
		{name: "echoed bootstrap fields", fromPrefill: kvtest.SGLangAnswer},
		{name: "no answer", want: all},
		{name: "nixl answer", fromPrefill: kvtest.VLLMAnswer, want: all},
		{name: "no host", fromPrefill: `{"bootstrap_port":8998,"bootstrap_room":"r"}`, want: []string{"bootstrap_host"}},
		{name: "null room", fromPrefill: `{"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":null}`,
			want: []string{"bootstrap_room"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, kv.NewSGLang(kv.SGLangDefaultPort).MissingParams(raw(tc.fromPrefill)))
		})
	}
}
