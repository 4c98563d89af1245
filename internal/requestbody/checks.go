// The OpenAI Responses and Anthropic Messages bodies are checked here
// (openai_responses.go, anthropic_messages.go) before any leg runs: what the coordinator relies
// on (the shape of the input and its content blocks, the output bound), a
// bound on their sizes, and what a stateless coordinator cannot serve. A
// body that fails is the client's fault (legs.ErrInvalidRequest), answered
// at once in the API's own error JSON, never by a worker.
//
// Fields the coordinator does not read are left to the worker: only the
// members named here are checked, and every unknown top-level member goes
// on as sent.

package requestbody

import (
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// MaxItems bounds the input items of a Responses body and the messages of
// a Messages body, and the content blocks of each.
const MaxItems = 4096

// Check checks root, a body of format f; other formats pass.
func Check(root *jsonbody.Object, f legs.Format) error { return checkFormat(root, f, false) }

// checkFormat is Check; stored lets a Responses body's "store" and
// "previous_response_id" through (checkResponses).
func checkFormat(root *jsonbody.Object, f legs.Format, stored bool) error {
	switch f {
	case legs.FormatResponses:
		return checkResponses(root, stored)
	case legs.FormatMessages:
		return checkMessages(root)
	}
	return nil
}

// eachObject calls fn for each element of the array raw (named name in
// errors), which must be an array of at most MaxItems objects. The object
// fn gets is parsed into the same memory each time: fn must not keep it.
func eachObject(raw []byte, name string, fn func(i int, obj *jsonbody.Object) error) error {
	if len(raw) == 0 || raw[0] != '[' {
		return legs.Invalidf("%s must be an array", name)
	}
	var obj jsonbody.Object
	return jsonbody.EachElement(raw, func(i int, elem []byte) error {
		if i >= MaxItems {
			return legs.Invalidf("%s has more than %d items", name, MaxItems)
		}
		if err := jsonbody.ParseObjectInto(&obj, elem); err != nil {
			return legs.Invalidf("%s[%d] must be an object", name, i)
		}
		return fn(i, &obj)
	})
}

// eachBlock checks msg (named name) as a message: a string "role" and a
// "content" that is a string, or an array of at most MaxItems objects,
// each of which fn checks unless plain passes it (plain takes no name:
// the common blocks cost no string for their name).
func eachBlock(msg *jsonbody.Object, name string, plain func(block *jsonbody.Object) bool, fn func(name string, block *jsonbody.Object) error) error {
	if _, err := requireString(msg, "role", name); err != nil {
		return err
	}
	content, ok := msg.Get("content")
	if !ok || jsonbody.IsNull(content) {
		return legs.Invalidf("%s.content is required", name)
	}
	if content[0] == '"' {
		return nil
	}
	name += ".content"
	return eachObject(content, name, func(j int, block *jsonbody.Object) error {
		if plain(block) {
			return nil
		}
		return fn(at(name, j), block)
	})
}

// plainType reports a block whose "type" is a string of types, not image.
func plainType(block *jsonbody.Object, image string, types []string) bool {
	typ, ok := block.String("type")
	return ok && typ != image && oneOf(typ, types...)
}

// stringMember is obj[key] as a string; present is false when it is
// missing or null, and a value of another type is an error naming it.
func stringMember(obj *jsonbody.Object, key, name string) (s string, present bool, err error) {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		return "", false, nil
	}
	s, ok = jsonbody.String(raw)
	if !ok {
		return "", true, legs.Invalidf("%s.%s must be a string", name, key)
	}
	return s, true, nil
}

// requireString is obj[key], which must be a string.
func requireString(obj *jsonbody.Object, key, name string) (string, error) {
	s, present, err := stringMember(obj, key, name)
	if err == nil && !present {
		err = legs.Invalidf("%s.%s is required", name, key)
	}
	return s, err
}

// positiveInt checks obj[key], when present and not null (or always, when
// required), is an integer of at least 1.
func positiveInt(obj *jsonbody.Object, key string, required bool) error {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		if required {
			return legs.Invalidf("%s is required", key)
		}
		return nil
	}
	if n, ok := jsonbody.Int(raw); !ok || n < 1 {
		return legs.Invalidf("%s must be an integer of at least 1", key)
	}
	return nil
}

// oneOf reports whether s is one of set.
func oneOf(s string, set ...string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// at names element i of the array name.
func at(name string, i int) string { return fmt.Sprintf("%s[%d]", name, i) }
