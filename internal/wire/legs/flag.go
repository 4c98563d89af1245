package legs

import "github.com/coordinator-project/coordinator/internal/jsonbody"

// Flag is obj[key], a flag of the client's body, as vLLM reads it
// (jsonbody.Flag: true, false, 0/1, "yes"/"no" and the like; null is
// false): false when the member is missing. A value vLLM would refuse is
// a client error naming the member. Every flag the coordinator decides on
// or refuses is read here, so it never reads one differently from the
// worker that serves the request.
func Flag(obj *jsonbody.Object, key string) (bool, error) {
	raw, ok := obj.Get(key)
	if !ok {
		return false, nil
	}
	v, ok := jsonbody.Flag(raw)
	if !ok {
		return false, Invalidf(`%q must be a boolean`, key)
	}
	return v, nil
}

// SpellFlag makes obj[key], a flag Flag read as value, the JSON literal
// true or false when the client spelled it otherwise ("yes", 1, "True"), so
// every worker reads it as the coordinator did: vLLM's pydantic would, but
// a worker that decodes a bool strictly (one written in Go) would refuse
// the request. A missing or null member, or a literal, is left as sent.
func SpellFlag(obj *jsonbody.Object, key string, value bool) {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		return
	}
	if _, literal := jsonbody.Bool(raw); literal {
		return
	}
	if value {
		obj.Set(key, []byte("true"))
	} else {
		obj.Set(key, []byte("false"))
	}
}
