package pd

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// usageShape is where an API's answer keeps its token counts: the usage
// object's keys, and where its prompt-cache count sits (D21 rewrites it).
type usageShape struct {
	prompt, completion string
	// details is the object in usage holding the cached count; "" when the
	// count is a member of usage itself (Anthropic's
	// cache_read_input_tokens).
	details string
	cached  string
	// wrapper is the member of a stream event that holds the answer whose
	// usage it reports ("response" of the Responses' response.completed,
	// "message" of the Messages' message_start); "" for none.
	wrapper string
}

// shapeOf is the usage shape of format f's answers.
func shapeOf(f legs.Format) usageShape {
	switch f {
	case legs.FormatResponses:
		return usageShape{prompt: "input_tokens", completion: "output_tokens", details: "input_tokens_details",
			cached: keyCachedTokens, wrapper: "response"}
	case legs.FormatMessages:
		return usageShape{prompt: "input_tokens", completion: "output_tokens", cached: "cache_read_input_tokens",
			wrapper: "message"}
	}
	return usageShape{prompt: keyPromptTokens, completion: keyCompletionTokens, details: keyPromptTokensDetails,
		cached: keyCachedTokens}
}

// holder is the object of an answer or stream event that carries the
// usage: obj itself, or its wrapper member (parsed) when obj has no usage
// of its own; nil when neither has one.
func (u usageShape) holder(obj *jsonbody.Object) (h *jsonbody.Object, wrapped bool) {
	if _, ok := obj.Get(keyUsage); ok || u.wrapper == "" {
		return obj, false
	}
	inner, ok := memberObject(obj, u.wrapper)
	if !ok {
		return nil, false
	}
	return inner, true
}

// counts is the object holding the cached count in usage: its details
// object (parsed), or usage itself.
func (u usageShape) counts(usage *jsonbody.Object) (*jsonbody.Object, bool) {
	if u.details == "" {
		return usage, true
	}
	return memberObject(usage, u.details)
}
