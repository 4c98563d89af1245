// Package kvtest holds the contract every kv.Connector must satisfy; each
// connector's tests call Contract.
package kvtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/contracttest"
	"github.com/coordinator-project/coordinator/connectors/kv"
)

// VLLMAnswer is a prefill worker's kv_transfer_params as vLLM sends it with
// the NixlConnector.
const VLLMAnswer = `{"do_remote_prefill": true, "do_remote_decode": false,
 "remote_block_ids": [[1, 2, 4]], "remote_engine_id": "e1101616-0d7c-4f3c-9a1e-1b2c3d4e5f60",
 "remote_request_id": "generate-tokens-abc123", "remote_host": "10.0.0.42",
 "remote_port": 5600, "tp_size": 1, "remote_num_tokens": 318}`

// SimulatorAnswer is a prefill worker's kv_transfer_params as the
// llm-d inference simulator sends it: block ids are strings.
const SimulatorAnswer = `{"do_remote_prefill":true,"do_remote_decode":false,` +
	`"remote_block_ids":["1","2","3"],"remote_engine_id":"sim-engine","remote_host":"10.0.0.7","remote_port":5557}`

// SGLangAnswer is a prefill worker's kv_transfer_params echoing a
// kv-sglang prefill leg's bootstrap fields, with its host.
const SGLangAnswer = `{"do_remote_prefill":true,"do_remote_decode":false,"bootstrap_host":"10.0.0.9",` +
	`"bootstrap_port":8998,"bootstrap_room":"5b0c3f5e-2f1d-4c7e-9a51-0f3c2d1e4b6a"}`

var (
	name      = regexp.MustCompile(`^kv(-[a-z0-9]+)+$`)
	fieldName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// Contract checks, as parallel subtests of t, what every kv.Connector must
// satisfy: a kebab-case "kv-" name; prefill params that are an object with
// do_remote_decode true and do_remote_prefill false; decode params, for
// any prefill answer or none, that are an object with do_remote_decode
// false and do_remote_prefill true; deterministic decode params; missing
// params (see missingParams) judged against complete, a prefill answer
// that has every field the connector needs; fresh results that do not
// alias the argument; safety under concurrent calls.
func Contract(t *testing.T, c kv.Connector, complete json.RawMessage) {
	t.Helper()

	t.Run("name", func(t *testing.T) {
		t.Parallel()
		assert.Regexp(t, name, c.Name())
	})

	t.Run("prefill params", func(t *testing.T) {
		t.Parallel()
		got, err := c.PrefillParams()
		require.NoError(t, err)
		assert.NoError(t, checkFlags(got, true, false), "%s", got)
	})

	t.Run("decode params", func(t *testing.T) {
		t.Parallel()
		prefill, err := c.PrefillParams()
		require.NoError(t, err)
		for _, tc := range []struct {
			name        string
			fromPrefill json.RawMessage
		}{
			{"no answer", nil},
			{"null", json.RawMessage(`null`)},
			{"empty object", json.RawMessage(`{}`)},
			{"array", json.RawMessage(`[1,2]`)},
			{"string", json.RawMessage(`"params"`)},
			{"vllm answer", json.RawMessage(VLLMAnswer)},
			{"simulator answer", json.RawMessage(SimulatorAnswer)},
			{"own prefill params", prefill},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				got, err := c.DecodeParams(tc.fromPrefill)
				require.NoError(t, err)
				assert.NoError(t, checkFlags(got, false, true), "%s", got)
			})
		}
	})

	t.Run("missing params", func(t *testing.T) { missingParams(t, c, complete) })
	t.Run("fresh results", func(t *testing.T) { freshResults(t, c) })
	t.Run("concurrent calls", func(t *testing.T) { concurrentCalls(t, c, complete) })
}

// missingParams: complete lacks nothing; no answer, a non-object or a
// malformed one lacks every needed field, each a snake_case name other
// than the two flags; complete without one of them, or with it null, lacks
// exactly that one; the argument is not modified.
func missingParams(t *testing.T, c kv.Connector, complete json.RawMessage) {
	t.Parallel()
	kept := bytes.Clone(complete)
	assert.Empty(t, c.MissingParams(complete), "complete answer %s", complete)
	assert.Equal(t, string(kept), string(complete), "argument modified")
	needed := c.MissingParams(nil)
	for _, answer := range []string{`null`, `[1,2]`, `"params"`, `{}`, `{"remote_host":`} {
		assert.Equal(t, needed, c.MissingParams(json.RawMessage(answer)), "answer %s", answer)
	}
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(complete, &obj), "complete must be a JSON object")
	for _, key := range needed {
		assert.Regexp(t, fieldName, key)
		assert.NotContains(t, []string{"do_remote_decode", "do_remote_prefill"}, key)
		require.Contains(t, obj, key, "complete answer lacks %s", key)
		without := maps.Clone(obj)
		delete(without, key)
		assert.Equal(t, []string{key}, c.MissingParams(encode(t, without)), "without %s", key)
		without[key] = json.RawMessage("null")
		assert.Equal(t, []string{key}, c.MissingParams(encode(t, without)), "%s null", key)
	}
}

func encode(t *testing.T, obj map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return b
}

// freshResults: every call returns a new slice, and DecodeParams neither
// modifies nor aliases its argument.
func freshResults(t *testing.T, c kv.Connector) {
	t.Parallel()
	first, err := c.PrefillParams()
	require.NoError(t, err)
	contracttest.Clobber(first)
	again, err := c.PrefillParams()
	require.NoError(t, err)
	assert.NoError(t, checkFlags(again, true, false), "%s", again)

	in := json.RawMessage(VLLMAnswer)
	want, err := c.DecodeParams(in)
	require.NoError(t, err)
	kept := bytes.Clone(want)
	contracttest.Clobber(want)
	got, err := c.DecodeParams(in)
	require.NoError(t, err)
	assert.Equal(t, string(kept), string(got), "decode params must be deterministic and fresh")
	assert.Equal(t, VLLMAnswer, string(in), "argument modified")
	contracttest.Clobber(got)
	assert.Equal(t, VLLMAnswer, string(in), "result aliases the argument")
}

// concurrentCalls: a connector is safe for concurrent use.
func concurrentCalls(t *testing.T, c kv.Connector, complete json.RawMessage) {
	t.Parallel()
	in := json.RawMessage(VLLMAnswer) // shared: connectors only read it
	contracttest.Concurrently(t, 16, 50, func() error {
		p, err := c.PrefillParams()
		if err == nil {
			err = checkFlags(p, true, false)
		}
		if err == nil {
			p, err = c.DecodeParams(in)
		}
		if err == nil {
			err = checkFlags(p, false, true)
		}
		if m := c.MissingParams(complete); err == nil && len(m) > 0 {
			err = fmt.Errorf("complete answer lacks %v", m)
		}
		return err
	})
}

// checkFlags reports whether raw is a JSON object whose do_remote_decode
// and do_remote_prefill are the JSON booleans decode and prefill.
func checkFlags(raw json.RawMessage, decode, prefill bool) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("not a JSON object: %q", raw)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	for _, f := range []struct {
		key  string
		want bool
	}{{"do_remote_decode", decode}, {"do_remote_prefill", prefill}} {
		v, ok := obj[f.key]
		if !ok {
			return fmt.Errorf("%s missing", f.key)
		}
		var got *bool
		if err := json.Unmarshal(v, &got); err != nil || got == nil {
			return errors.Join(fmt.Errorf("%s: %s is not a boolean", f.key, v), err)
		}
		if *got != f.want {
			return fmt.Errorf("%s: got %t, want %t", f.key, *got, f.want)
		}
	}
	return nil
}
