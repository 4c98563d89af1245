package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// checkResponses checks a Responses body:
//
//   - stateless: "store" and "background" true (as vLLM reads a flag:
//     legs.Flag, so "true", 1 or "yes" too), and a "previous_response_id"
//     are refused (the coordinator keeps no response to retrieve or
//     continue; a worker behind the gateway would keep it on one pod of
//     many). A value vLLM would refuse is refused too. A missing "store",
//     which vLLM takes as true, is served as false (see Unstored).
//   - "input" is required: a string, or an array of at most MaxItems
//     objects; an item with a "role" (a message) has a "content" that is a
//     string or an array of at most MaxItems content parts, each an object
//     whose "type" is a known one; an input_image's "image_url", when
//     present, is a string.
//   - "max_output_tokens", when set, is an integer of at least 1.
//
// A coordinator that stores responses (stored: responses.store.backend is
// not off) lets "store" and "previous_response_id" through: its response
// store reads them (service/responses).
func checkResponses(root *jsonbody.Object, stored bool) error {
	if err := checkStateless(root, stored); err != nil {
		return err
	}
	if background, err := legs.Flag(root, bodykeys.Background); err != nil || background {
		return orInvalid(err, `"background": true is not supported: the coordinator is stateless`)
	}
	if err := positiveInt(root, "max_output_tokens", false); err != nil {
		return err
	}
	raw, ok := root.Get(bodykeys.Input)
	if !ok || jsonbody.IsNull(raw) {
		return legs.Invalidf("input is required")
	}
	if raw[0] == '"' {
		return nil
	}
	return eachObject(raw, bodykeys.Input, checkResponsesItem)
}

// checkStateless refuses "store": true, a "previous_response_id" and a
// "conversation" unless stored.
func checkStateless(root *jsonbody.Object, stored bool) error {
	if stored {
		return nil
	}
	if store, err := legs.Flag(root, bodykeys.Store); err != nil || store {
		return orInvalid(err, `"store": true is not supported: the coordinator is stateless (send "store": false)`)
	}
	if raw, ok := root.Get("previous_response_id"); ok && !jsonbody.IsNull(raw) {
		return legs.Invalidf(`"previous_response_id" is not supported: the coordinator is stateless (send the conversation in "input")`)
	}
	if raw, ok := root.Get("conversation"); ok && !jsonbody.IsNull(raw) {
		return legs.Invalidf(`"conversation" is not supported: the coordinator is stateless (send the conversation in "input")`)
	}
	return nil
}

// orInvalid is err, else a client error with msg.
func orInvalid(err error, msg string) error {
	if err != nil {
		return err
	}
	return legs.Invalidf("%s", msg)
}

// Unstored makes root, a Responses body the coordinator serves, say
// "store": false to every leg: vLLM stores a response unless told not to
// (its "store" defaults to true), and a response kept on one worker of
// many, which no later request can reach through the coordinator, only
// costs that worker memory. A body that says false already is left as it
// is; null or a false-like value ("no", 0) becomes false. Other formats,
// which have no "store", pass. Call it after Check.
func Unstored(root *jsonbody.Object, f legs.Format) {
	if f != legs.FormatResponses {
		return
	}
	if raw, ok := root.Get(bodykeys.Store); ok && string(raw) == "false" {
		return
	}
	root.Set(bodykeys.Store, []byte("false"))
}

// responsesPartTypes are the content part types of a Responses message.
var responsesPartTypes = []string{
	"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal",
	"summary_text", "reasoning_text",
}

// plainPart passes a part of a known type other than input_image.
func plainPart(part *jsonbody.Object) bool { return plainType(part, "input_image", responsesPartTypes) }

func checkResponsesItem(i int, item *jsonbody.Object) error {
	if _, isMessage := item.Get("role"); !isMessage {
		return nil // function calls, their outputs, reasoning, ...: the worker's to read
	}
	return eachBlock(item, at("input", i), plainPart, func(pname string, part *jsonbody.Object) error {
		typ, err := requireString(part, "type", pname)
		if err != nil {
			return err
		}
		if !oneOf(typ, responsesPartTypes...) {
			return legs.Invalidf("%s.type: unknown content type %q", pname, typ)
		}
		if typ == "input_image" {
			_, _, err = stringMember(part, "image_url", pname)
		}
		return err
	})
}
