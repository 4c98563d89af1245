package tochat

import (
	"encoding/json"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// responsesBody is what the conversion reads of a Responses body.
type responsesBody struct {
	Model              json.RawMessage   `json:"model"`
	Instructions       json.RawMessage   `json:"instructions"`
	Input              json.RawMessage   `json:"input"`
	Tools              []json.RawMessage `json:"tools"`
	ChatTemplateKwargs json.RawMessage   `json:"chat_template_kwargs"`
}

// item is a Responses input item, the members the conversion reads.
type item struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	Summary          []inputPart     `json:"summary"`
	EncryptedContent json.RawMessage `json:"encrypted_content"`
}

// inputPart is a Responses content part.
type inputPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// Responses is the chat body vLLM renders for the Responses body (or an
// input_tokens body) body: "instructions" as a system message, a string
// "input" as a user message, and each input item as vLLM's
// construct_input_messages makes it: a message with its text parts as
// text and input_image parts as image_url, an assistant's text, reasoning
// and function_call items merged into one assistant message (its content,
// "reasoning" and tool_calls), a function_call_output as a tool message.
// The function tools become chat functions; other tools (built-in, MCP)
// are left out, as vLLM does without a tool server.
func Responses(body []byte) ([]byte, error) {
	var in responsesBody
	if err := decode(body, &in, "responses body"); err != nil {
		return nil, err
	}
	out := chatBody{Model: in.Model, ChatTemplateKwargs: in.ChatTemplateKwargs}
	if s, ok := stringOf(in.Instructions); ok && s != "" {
		out.Messages = append(out.Messages, message{Role: "system", Content: s})
	}
	if s, ok := stringOf(in.Input); ok {
		out.Messages = append(out.Messages, message{Role: "user", Content: s})
	} else {
		var items []item
		if err := decode(in.Input, &items, "input"); err != nil {
			return nil, err
		}
		for _, it := range items {
			var err error
			if out.Messages, err = appendItem(out.Messages, it); err != nil {
				return nil, err
			}
		}
	}
	if err := responsesTools(&out, in.Tools); err != nil {
		return nil, err
	}
	return encode(&out)
}

// appendItem appends the chat message of one input item, or merges it
// into the assistant message before it.
func appendItem(msgs []message, it item) ([]message, error) {
	var prev *message
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		prev = &msgs[n-1]
	}
	switch {
	case it.Type == "function_call":
		call := toolCall{ID: it.CallID, Type: "function", Function: functionCall{Name: it.Name, Arguments: it.Arguments}}
		if prev != nil {
			prev.ToolCalls = append(prev.ToolCalls, call)
			return msgs, nil
		}
		return append(msgs, message{Role: "assistant", ToolCalls: []toolCall{call}}), nil
	case it.Type == "function_call_output":
		id := it.CallID
		out, _ := stringOf(it.Output)
		return append(msgs, message{Role: "tool", ToolCallID: &id, Content: out}), nil
	case it.Type == "reasoning":
		return appendReasoning(msgs, prev, it)
	case it.Role == "assistant":
		text, ok := assistantText(it.Content)
		if !ok {
			return msgs, nil
		}
		if prev != nil && prev.Content == nil {
			prev.Content = text
			return msgs, nil
		}
		return append(msgs, message{Role: "assistant", Content: text}), nil
	case it.Role != "":
		content, err := inputContent(it.Content)
		if err != nil {
			return nil, err
		}
		return append(msgs, message{Role: it.Role, Content: content}), nil
	}
	return nil, legs.Invalidf("input item of type %q cannot be counted", it.Type)
}

// appendReasoning merges a reasoning item's text (its content's first
// part, else its summary's) into the assistant message before it, or
// starts one. Encrypted reasoning is refused, as vLLM refuses it.
func appendReasoning(msgs []message, prev *message, it item) ([]message, error) {
	if !isNull(it.EncryptedContent) {
		return nil, legs.Invalidf("encrypted reasoning content is not supported")
	}
	text := ""
	var parts []inputPart
	if json.Unmarshal(it.Content, &parts) == nil && len(parts) > 0 {
		text = parts[0].Text
	} else if len(it.Summary) > 0 {
		text = it.Summary[0].Text
	}
	if prev != nil && prev.Reasoning == nil {
		prev.Reasoning = &text
		return msgs, nil
	}
	return append(msgs, message{Role: "assistant", Reasoning: &text}), nil
}

// assistantText is an assistant message's text: its string content or its
// first part's text.
func assistantText(raw json.RawMessage) (string, bool) {
	if s, ok := stringOf(raw); ok {
		return s, true
	}
	var parts []inputPart
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return "", false
	}
	return parts[0].Text, true
}

// inputContent is a message's content for chat: a string as it is, text
// parts (input_text, output_text, ...) as text, input_image parts as
// image_url.
func inputContent(raw json.RawMessage) (any, error) {
	if s, ok := stringOf(raw); ok {
		return s, nil
	}
	var parts []inputPart
	if err := decode(raw, &parts, "content"); err != nil {
		return nil, err
	}
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "input_file", "input_audio":
			return nil, legs.Invalidf("content part of type %q is not supported by token counting", p.Type)
		case "input_image":
		default:
			out = append(out, textPart(p.Text))
			continue
		}
		url, ok := stringOf(p.ImageURL)
		if !ok {
			return nil, legs.Invalidf("input_image without image_url cannot be counted")
		}
		out = append(out, imagePart(url))
	}
	return out, nil
}

// responsesTools writes the function tools as chat functions.
func responsesTools(out *chatBody, tools []json.RawMessage) error {
	for _, raw := range tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      json.RawMessage `json:"strict"`
		}
		if err := decode(raw, &t, "tools"); err != nil {
			return err
		}
		if t.Type != "function" {
			continue
		}
		out.Tools = append(out.Tools, tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	return nil
}
