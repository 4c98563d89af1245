package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// checkMessages checks a Messages body as vLLM's AnthropicMessagesRequest
// would (vllm/entrypoints/anthropic/protocol.py), at once:
//
//   - "max_tokens" is required, an integer of at least 1;
//   - "messages" is required, an array of at most MaxItems objects, each
//     with a string "role" and a "content" that is a string or an array of
//     at most MaxItems content blocks, each an object of a known "type";
//   - an image block's "source" is {"type":"url","url":<string>} or
//     {"type":"base64","media_type":<string>,"data":<string>};
//   - "system", when set, is a string or an array of text blocks.
func checkMessages(root *jsonbody.Object) error {
	if err := positiveInt(root, bodykeys.MaxTokens, true); err != nil {
		return err
	}
	return checkMessagesInput(root)
}

// checkMessagesInput is checkMessages but for max_tokens: the prompt's
// members ("system", "messages"), which a count_tokens body has too.
func checkMessagesInput(root *jsonbody.Object) error {
	if raw, ok := root.Get("system"); ok && !jsonbody.IsNull(raw) && raw[0] != '"' {
		if err := eachObject(raw, "system", func(i int, block *jsonbody.Object) error {
			return checkBlock(at("system", i), block)
		}); err != nil {
			return err
		}
	}
	raw, ok := root.Get(bodykeys.Messages)
	if !ok || jsonbody.IsNull(raw) {
		return legs.Invalidf("messages is required")
	}
	return eachObject(raw, bodykeys.Messages, func(i int, msg *jsonbody.Object) error {
		return eachBlock(msg, at("messages", i), plainBlock, checkBlock)
	})
}

// messagesBlockTypes are the content block types vLLM's
// AnthropicContentBlock takes.
var messagesBlockTypes = []string{
	"text", "image", "tool_use", "tool_result", "tool_reference", "thinking", "redacted_thinking",
}

// plainBlock passes a block of a known type other than image.
func plainBlock(block *jsonbody.Object) bool { return plainType(block, "image", messagesBlockTypes) }

func checkBlock(name string, block *jsonbody.Object) error {
	typ, err := requireString(block, "type", name)
	if err != nil {
		return err
	}
	if !oneOf(typ, messagesBlockTypes...) {
		return legs.Invalidf("%s.type: unknown content block type %q", name, typ)
	}
	if typ != "image" {
		return nil
	}
	source := block.Object("source")
	if source == nil {
		raw, _ := block.Get("source")
		var err error
		if source, err = jsonbody.ParseObject(raw); err != nil {
			return legs.Invalidf("%s.source must be an object", name)
		}
	}
	name += ".source"
	kind, err := requireString(source, "type", name)
	if err != nil {
		return err
	}
	switch kind {
	case "url":
		_, err = requireString(source, "url", name)
	case "base64":
		if _, err = requireString(source, "media_type", name); err == nil {
			_, err = requireString(source, "data", name)
		}
	default:
		err = legs.Invalidf("%s.type: unknown image source type %q (url or base64)", name, kind)
	}
	return err
}
