package connectors

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DecodeObject splits a JSON object into its fields, values kept as raw
// bytes (transfer params are opaque: no field is re-typed). Empty input,
// null and any other non-object value give nil; malformed JSON is an error.
func DecodeObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
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

// EncodeObject writes obj as a compact JSON object with sorted keys, values
// byte for byte (no HTML escaping).
func EncodeObject(obj map[string]json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
