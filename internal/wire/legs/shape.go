package legs

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// CapSingleToken makes a leg body produce exactly one token and answer as
// one JSON document: max_tokens := 1 (on sampling_params for generate,
// created when missing) with min_tokens removed beside it, the top-level
// max_completion_tokens and max_output_tokens := 1 when present (decision
// D11), stream := false and stream_options removed. Every other member is
// kept byte for byte. A generate sampling_params that is not an object is a
// client error.
func CapSingleToken(obj *jsonbody.Object, f Format) error {
	target := obj
	if f == FormatGenerate {
		sp, err := editChild(obj, bodykeys.SamplingParams)
		if err != nil {
			return err
		}
		target = sp
	}
	target.Set(bodykeys.MaxTokens, []byte("1"))
	target.Delete("min_tokens")
	for _, key := range [...]string{"max_completion_tokens", "max_output_tokens"} {
		if _, ok := obj.Get(key); ok {
			obj.Set(key, []byte("1"))
		}
	}
	obj.Set(bodykeys.Stream, []byte("false"))
	obj.Delete(bodykeys.StreamOptions)
	return nil
}

// SetNested sets obj[outer][inner][key] = value, creating the two objects
// when they are missing or null and keeping every other field. A present
// outer or inner value that is not an object is a client error. obj is a
// leg's (or a parsed) object: indexed children are edited through copies.
func SetNested(obj *jsonbody.Object, outer, inner, key string, value []byte) error {
	outerObj, err := editChild(obj, outer)
	if err != nil {
		return err
	}
	innerObj, err := editChild(outerObj, inner)
	if err != nil {
		return Invalidf("%s.%s: %v", outer, inner, err)
	}
	innerObj.Set(key, value)
	return nil
}

// editChild returns obj[key] as an object to edit, in place in obj: its
// indexed copy when obj has one, else parsed from its text; a missing or
// null value becomes an empty object. Another value is a client error.
func editChild(obj *jsonbody.Object, key string) (*jsonbody.Object, error) {
	if child := obj.EditObject(key); child != nil {
		return child, nil
	}
	child, err := childObject(obj, key)
	if err != nil {
		return nil, err
	}
	child.Touch() // written member by member, as an edit would
	obj.SetObject(key, child)
	return child, nil
}

// childObject parses obj[key] as an object; missing or null gives an empty one.
func childObject(obj *jsonbody.Object, key string) (*jsonbody.Object, error) {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		raw = []byte("{}")
	}
	child, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil, Invalidf("%s must be an object", key)
	}
	return child, nil
}
