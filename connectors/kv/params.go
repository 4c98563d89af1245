package kv

import (
	"bytes"
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

// missing names the fields of required that fromPrefill, a prefill
// worker's kv_transfer_params, lacks or holds as null; every one when it
// is nil, not an object or malformed.
func missing(fromPrefill json.RawMessage, required ...string) []string {
	obj, _ := connectors.DecodeObject(fromPrefill)
	var out []string
	for _, key := range required {
		if v, ok := obj[key]; !ok || string(bytes.TrimSpace(v)) == "null" {
			out = append(out, key)
		}
	}
	return out
}
