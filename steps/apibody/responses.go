package apibody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps/legs"
)

// checkResponses checks a Responses body:
//
//   - stateless: "store": true, a "previous_response_id" and "background":
//     true are refused (the coordinator keeps no response to retrieve or
//     continue; a worker behind the gateway would keep it on one pod of
//     many). A missing "store" is served as false.
//   - "input" is required: a string, or an array of at most MaxItems
//     objects; an item with a "role" (a message) has a "content" that is a
//     string or an array of at most MaxItems content parts, each an object
//     whose "type" is a known one; an input_image's "image_url", when
//     present, is a string.
//   - "max_output_tokens", when set, is an integer of at least 1.
func checkResponses(root *jsonbody.Object) error {
	if raw, ok := root.Get("store"); ok {
		if v, _ := jsonbody.Bool(raw); v {
			return legs.Invalidf(`"store": true is not supported: the coordinator is stateless (send "store": false)`)
		}
	}
	if raw, ok := root.Get("previous_response_id"); ok && !jsonbody.IsNull(raw) {
		return legs.Invalidf(`"previous_response_id" is not supported: the coordinator is stateless (send the conversation in "input")`)
	}
	if raw, ok := root.Get("background"); ok {
		if v, _ := jsonbody.Bool(raw); v {
			return legs.Invalidf(`"background": true is not supported: the coordinator is stateless`)
		}
	}
	if err := positiveInt(root, "max_output_tokens", false); err != nil {
		return err
	}
	raw, ok := root.Get("input")
	if !ok || jsonbody.IsNull(raw) {
		return legs.Invalidf("input is required")
	}
	if raw[0] == '"' {
		return nil
	}
	return eachObject(raw, "input", checkResponsesItem)
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
