package kv

import (
	"encoding/json"
	"fmt"

	"github.com/coordinator-project/coordinator/connectors"
)

// handOff returns the decode leg's kv_transfer_params for the connectors
// whose decode worker pulls from the prefill worker: every field of the
// prefill answer, verbatim, with do_remote_decode false and
// do_remote_prefill true.
func handOff(fromPrefill json.RawMessage) (json.RawMessage, error) {
	obj, err := connectors.DecodeObject(fromPrefill)
	if err != nil {
		return nil, fmt.Errorf("kv_transfer_params: prefill answer: %w", err)
	}
	if obj == nil {
		obj = make(map[string]json.RawMessage, 2)
	}
	obj["do_remote_decode"] = json.RawMessage("false")
	obj["do_remote_prefill"] = json.RawMessage("true")
	return connectors.EncodeObject(obj)
}
