package kv_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/connectors"
	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/connectors/kv/kvtest"
)

// The recipe "add a connector" of CONTRIBUTING.md: a connector is one
// file, connectors/kv/<name>.go, owning the wire shape of
// kv_transfer_params; its test calls kvtest.Contract; one line in
// kv.Module registers it: AsConnector(NewHostHandOff).

// hostHandOffName is the example connector's config name (kv_connector).
const hostHandOffName = "kv-host-hand-off"

// HostHandOff asks the prefill worker to keep its KV for a remote decode
// and hands the decode worker the one field it needs from the prefill
// answer, remote_host, byte for byte.
type HostHandOff struct{}

// NewHostHandOff returns the example connector; like every constructor
// of the kv_connectors group it is cheap and starts nothing.
func NewHostHandOff() *HostHandOff { return &HostHandOff{} }

// Name returns hostHandOffName.
func (*HostHandOff) Name() string { return hostHandOffName }

// PrefillParams returns the two flags and a placeholder the prefill
// worker fills in; a fresh slice each call (the conversion copies).
func (*HostHandOff) PrefillParams() (json.RawMessage, error) {
	return json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_host":null}`), nil
}

// DecodeParams returns the two flags and the prefill answer's remote_host
// when it has one; malformed JSON is an error.
func (*HostHandOff) DecodeParams(fromPrefill json.RawMessage) (json.RawMessage, error) {
	answer, err := connectors.DecodeObject(fromPrefill)
	if err != nil {
		return nil, fmt.Errorf("kv_transfer_params: prefill answer: %w", err)
	}
	out := map[string]json.RawMessage{
		"do_remote_decode":  json.RawMessage("false"),
		"do_remote_prefill": json.RawMessage("true"),
	}
	if host, ok := answer["remote_host"]; ok {
		out["remote_host"] = host
	}
	return connectors.EncodeObject(out) // fresh memory, never the argument's
}

// MissingParams names remote_host when the answer lacks it or holds null.
func (*HostHandOff) MissingParams(fromPrefill json.RawMessage) []string {
	answer, _ := connectors.DecodeObject(fromPrefill)
	if host, ok := answer["remote_host"]; !ok || string(bytes.TrimSpace(host)) == "null" {
		return []string{"remote_host"}
	}
	return nil
}

var _ kv.Connector = (*HostHandOff)(nil)

// What every connector must pass: the contract kit, with a prefill answer
// that has every field the connector needs.
func TestHostHandOffContract(t *testing.T) {
	t.Parallel()
	kvtest.Contract(t, NewHostHandOff(), json.RawMessage(`{"remote_host":"10.0.0.42"}`))
}

// Registered in the kv_connectors group next to the built-in ones, the
// connector is what kv_connector: kv-host-hand-off names. (The test sets
// the environment kv.Module reads, so it does not run in parallel.)
func TestHostHandOffRegistration(t *testing.T) {
	t.Setenv(kv.SGLangPortEnv, "")
	var set *kv.Set
	app := fx.New(kv.Module, fx.Provide(kv.AsConnector(NewHostHandOff)), fx.Populate(&set), fx.NopLogger)
	require.NoError(t, app.Err())
	assert.Contains(t, set.Names(), hostHandOffName)
	c, err := set.Get(hostHandOffName)
	require.NoError(t, err)
	assert.Equal(t, hostHandOffName, c.Name())
}

// Example_addAConnector prints the wire shape the connector owns: the
// prefill leg's kv_transfer_params, the decode leg's after a prefill
// answer, and what a decode leg would lack after an answer without it.
func Example_addAConnector() {
	c := NewHostHandOff()
	prefill, _ := c.PrefillParams()
	fmt.Println("prefill:", string(prefill))
	decode, _ := c.DecodeParams(json.RawMessage(kvtest.VLLMAnswer))
	fmt.Println("decode: ", string(decode))
	fmt.Println("missing:", c.MissingParams(json.RawMessage(`{"do_remote_prefill":true}`)))
	// Output:
	// prefill: {"do_remote_decode":true,"do_remote_prefill":false,"remote_host":null}
	// decode:  {"do_remote_decode":false,"do_remote_prefill":true,"remote_host":"10.0.0.42"}
	// missing: [remote_host]
}
