// Package ectest holds the contract every ec.Connector must satisfy; each
// connector's tests call Contract.
package ectest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/contracttest"
	"github.com/coordinator-project/coordinator/connectors/ec"
)

// EncodeAnswers are two encode workers' ec_transfer_params as vLLM sends
// them, one image each.
var EncodeAnswers = []string{
	`{"abc123hash": {"peer_host": "10.0.0.1", "peer_port": 5501,
	  "size_bytes": 2359296, "nixl_agent_metadata_b64": "TklYTA=="}}`,
	`{"def456hash": {"peer_host": "10.0.0.2", "peer_port": 5502,
	  "size_bytes": 2359296, "nixl_agent_metadata_b64": "QWdlbnQ="}}`,
}

var name = regexp.MustCompile(`^ec(-[a-z0-9]+)+$`)

// Contract checks, as parallel subtests of t, what every ec.Connector must
// satisfy: a kebab-case "ec-" name; nil when the encoders sent no
// descriptors (no answers, or answers that are nil, null, empty or not
// objects); nil or a JSON object otherwise; deterministic, fresh results
// that do not alias the arguments, which stay unmodified; safety under
// concurrent calls.
func Contract(t *testing.T, c ec.Connector) {
	t.Helper()

	t.Run("name", func(t *testing.T) {
		t.Parallel()
		assert.Regexp(t, name, c.Name())
	})

	t.Run("no descriptors", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name       string
			fromEncode []json.RawMessage
		}{
			{"nil", nil},
			{"empty", []json.RawMessage{}},
			{"nil answer", []json.RawMessage{nil}},
			{"null answer", []json.RawMessage{json.RawMessage(`null`)}},
			{"empty object", []json.RawMessage{json.RawMessage(`{}`)}},
			{"not objects", []json.RawMessage{
				json.RawMessage(`[1]`), json.RawMessage(`"abc123hash"`), json.RawMessage(`42`),
			}},
			{"mixed", []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`{}`), json.RawMessage(`[]`)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				got, err := c.PrefillParams(tc.fromEncode)
				require.NoError(t, err)
				assert.Nil(t, got)
			})
		}
	})

	t.Run("descriptors", func(t *testing.T) {
		t.Parallel()
		got, err := c.PrefillParams(answers())
		require.NoError(t, err)
		assert.NoError(t, checkObject(got), "%s", got)
	})

	t.Run("fresh results", func(t *testing.T) {
		t.Parallel()
		freshResults(t, c)
	})

	t.Run("concurrent calls", func(t *testing.T) {
		t.Parallel()
		concurrentCalls(t, c)
	})
}

// freshResults checks the results are deterministic, fresh and alias
// neither the arguments nor each other.
func freshResults(t *testing.T, c ec.Connector) {
	in := answers()
	first, err := c.PrefillParams(in)
	require.NoError(t, err)
	kept := bytes.Clone(first)
	contracttest.Clobber(first)
	again, err := c.PrefillParams(in)
	require.NoError(t, err)
	assert.Equal(t, string(kept), string(again), "results must be deterministic and fresh")
	assert.Equal(t, answers(), in, "arguments modified")
	contracttest.Clobber(again)
	assert.Equal(t, answers(), in, "result aliases the arguments")
}

// concurrentCalls checks calls from many goroutines at once on shared
// arguments each give a valid object.
func concurrentCalls(t *testing.T, c ec.Connector) {
	in := answers() // shared: connectors only read it
	contracttest.Concurrently(t, 16, 50, func() error {
		got, err := c.PrefillParams(in)
		if err != nil {
			return err
		}
		return checkObject(got)
	})
}

// answers returns a fresh copy of EncodeAnswers.
func answers() []json.RawMessage {
	out := make([]json.RawMessage, len(EncodeAnswers))
	for i, a := range EncodeAnswers {
		out[i] = json.RawMessage(a)
	}
	return out
}

// checkObject reports whether raw is nil or a JSON object.
func checkObject(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("neither nil nor a JSON object: %q", raw)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	return nil
}
