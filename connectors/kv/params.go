package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// handOff returns the decode leg's kv_transfer_params for the connectors
// whose decode worker pulls from the prefill worker: every field of the
// prefill answer, verbatim, with do_remote_decode false and
// do_remote_prefill true.
func handOff(fromPrefill json.RawMessage) (json.RawMessage, error) {
	obj, err := decodeObject(fromPrefill)
	if err != nil {
		return nil, fmt.Errorf("kv_transfer_params: prefill answer: %w", err)
	}
	if obj == nil {
		obj = make(map[string]json.RawMessage, 2)
	}
	obj["do_remote_decode"] = json.RawMessage("false")
	obj["do_remote_prefill"] = json.RawMessage("true")
	return encodeObject(obj)
}

// decodeObject splits a JSON object into its fields, values kept as raw
// bytes. Empty input, null and any other non-object value give nil;
// malformed JSON is an error.
func decodeObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, nil // valid JSON, not an object
		}
		return nil, err
	}
	return obj, nil
}

// encodeObject writes obj as a compact JSON object with sorted keys, values
// byte for byte (no HTML escaping).
func encodeObject(obj map[string]json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
