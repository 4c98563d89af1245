package kv_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/connectors/kv/kvtest"
)

// FuzzDecodeParams gives each connector's DecodeParams an arbitrary prefill
// answer (seeds here and in testdata/fuzz/FuzzDecodeParams). It must not
// panic. The connectors that hand the answer on (kv-nixl, kv-sglang) must
// refuse malformed JSON, and otherwise answer an object with the answer's
// members (the last of duplicate keys), each value the answer's own bytes
// (whitespace aside), and the two role flags; kv-shared-storage answers the
// flags whatever it is given. Feeding a result back in gives it again.
// MissingParams never panics, and judges the answer as it judges the decode
// params made from it.
func FuzzDecodeParams(f *testing.F) {
	for _, seed := range []string{
		"", " ", "null", "true", "[]", "{}", `"x"`, "1",
		kvtest.VLLMAnswer, kvtest.SimulatorAnswer,
		`{"do_remote_decode":true,"do_remote_prefill":false,"remote_port":"5600"}`,
		`{"a":1,"a":{"b":[1, 2]},"\u0061":3}`,
		`{"remote_block_ids":[[1,2],[3]],"x":1.50,"y":-0,"z":1e400,"w":"<&>"}`,
		`{"a":1`, `{"a":}`, `{"a":1}x`, "{\"a\":\"\xff\"}", `{"":null}`,
	} {
		f.Add([]byte(seed))
	}
	handOff := []kv.Connector{kv.NewNIXL(), kv.NewSGLang(kv.SGLangDefaultPort)}
	f.Fuzz(func(t *testing.T, answer []byte) {
		for _, c := range handOff {
			got, err := c.DecodeParams(bytes.Clone(answer))
			want, ok := refHandOff(answer)
			if !ok {
				assert.Error(t, err, "%s takes malformed JSON", c.Name())
				continue
			}
			require.NoError(t, err, c.Name())
			if !utf8.Valid(answer) {
				continue // encoding/json keeps invalid UTF-8 in values; jsonbody refused it upstream
			}
			assertMembers(t, want, got)
			assert.Equal(t, c.MissingParams(answer), c.MissingParams(got),
				"%s: what the answer lacks is what the decode leg lacks", c.Name())
			again, err := c.DecodeParams(got)
			require.NoError(t, err)
			assert.Equal(t, string(got), string(again), "%s: a result fed back in comes back the same", c.Name())
		}
		assert.Nil(t, kv.NewSharedStorage().MissingParams(answer))
		got, err := kv.NewSharedStorage().DecodeParams(answer)
		require.NoError(t, err)
		assert.JSONEq(t, `{"do_remote_decode":false,"do_remote_prefill":true}`, string(got))
	})
}

// refHandOff is the decode params of the hand-off connectors by their
// contract, as members with their compact raw values: empty input, null
// and non-objects give just the flags; malformed JSON is refused (ok false).
func refHandOff(answer []byte) (map[string]string, bool) {
	members := map[string]string{}
	if len(bytes.TrimSpace(answer)) > 0 {
		if !json.Valid(answer) {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(answer, &obj) == nil {
			for k, v := range obj {
				members[k] = compact(v)
			}
		}
	}
	members["do_remote_decode"], members["do_remote_prefill"] = "false", "true"
	return members, true
}

// assertMembers checks that got is one JSON object whose members are want,
// values byte for byte.
func assertMembers(t *testing.T, want map[string]string, got json.RawMessage) {
	t.Helper()
	require.True(t, json.Valid(got), "%s", got)
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got, &obj), "%s", got)
	members := make(map[string]string, len(obj))
	for k, v := range obj {
		members[k] = string(v)
	}
	assert.Equal(t, want, members)
}

func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}
