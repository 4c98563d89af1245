package sim

import (
	"encoding/json"
	"strings"
)

// The prompt of a Responses or Messages request, counted as vLLM counts
// it: vLLM turns the conversation into chat messages (the system prompt
// first) and renders them with the chat template, so its usage counts the
// template's tokens, as the render service's chat render does. The
// simulator converts the plain conversations (text and images); a body
// with anything else (tool calls, thinking, reasoning items) is counted by
// its text, as before.

// billingHeaderPrefix starts the system block Claude Code adds per
// request, which vLLM drops.
const billingHeaderPrefix = "x-anthropic-billing-header"

// apiBlock is a Messages content block or a Responses content part, as
// far as the simulator converts them.
type apiBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Source   json.RawMessage `json:"source"`    // messages image
	ImageURL json.RawMessage `json:"image_url"` // responses input_image
}

// apiMessage is a Messages message or a Responses input item.
type apiMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// templateIDs is the prompt's token IDs through the chat template, nil
// when the simulator does not convert the body.
func (req *workerRequest) templateIDs() []uint32 {
	var msgs []chatMessage
	var ok bool
	switch req.format {
	case formatMessages:
		msgs, ok = messagesChat(req.System, req.Messages)
	case formatResponses:
		msgs, ok = responsesChat(req.Instructions, req.Input)
	}
	if !ok {
		return nil
	}
	tok, err := sharedTokenizer()
	if err != nil {
		return nil
	}
	ids, _, apiErr := tok.applyChatTemplate(msgs, true)
	if apiErr != nil {
		return nil
	}
	return ids
}

// messagesChat is a Messages conversation as chat messages: the system
// text (the top-level system's, then the system messages') joined first.
func messagesChat(system, raw json.RawMessage) ([]chatMessage, bool) {
	var in []apiMessage
	if json.Unmarshal(raw, &in) != nil {
		return nil, false
	}
	var sys strings.Builder
	if !appendSystem(&sys, system) {
		return nil, false
	}
	var out []chatMessage
	for _, m := range in {
		if m.Role == "system" {
			if !appendSystem(&sys, m.Content) {
				return nil, false
			}
			continue
		}
		content, ok := chatContent(m.Content)
		if !ok {
			return nil, false
		}
		out = append(out, chatMessage{Role: m.Role, Content: content})
	}
	if sys.Len() > 0 {
		s, _ := json.Marshal(sys.String())
		out = append([]chatMessage{{Role: "system", Content: s}}, out...)
	}
	return out, true
}

// appendSystem adds a system prompt's text: a string or text blocks.
func appendSystem(b *strings.Builder, raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.WriteString(s)
		return true
	}
	var blocks []apiBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return false
	}
	for _, bl := range blocks {
		if bl.Type != "text" {
			return false
		}
		if !strings.HasPrefix(bl.Text, billingHeaderPrefix) {
			b.WriteString(bl.Text)
		}
	}
	return true
}

// responsesChat is a Responses input as chat messages, the instructions
// first as a system message.
func responsesChat(instructions, input json.RawMessage) ([]chatMessage, bool) {
	var out []chatMessage
	var s string
	if json.Unmarshal(instructions, &s) == nil && s != "" {
		out = append(out, chatMessage{Role: "system", Content: instructions})
	}
	if json.Unmarshal(input, &s) == nil {
		return append(out, chatMessage{Role: "user", Content: input}), true
	}
	var items []apiMessage
	if json.Unmarshal(input, &items) != nil {
		return nil, false
	}
	for _, it := range items {
		if it.Role == "" || (it.Type != "" && it.Type != "message") {
			return nil, false
		}
		content, ok := chatContent(it.Content)
		if !ok {
			return nil, false
		}
		out = append(out, chatMessage{Role: it.Role, Content: content})
	}
	return out, true
}

// chatContent is a message's content for the chat template: a string as
// it is, text blocks as text parts, images as image_url parts.
func chatContent(raw json.RawMessage) (json.RawMessage, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return raw, true
	}
	var blocks []apiBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, false
	}
	parts := make([]contentPart, 0, len(blocks))
	for _, bl := range blocks {
		var p contentPart
		switch bl.Type {
		case "text", "input_text", "output_text":
			p = contentPart{Type: "text", Text: bl.Text}
		case "image", "input_image":
			url, ok := blockImageURL(bl)
			if !ok {
				return nil, false
			}
			p = contentPart{Type: "image_url", ImageURL: &struct {
				URL string `json:"url"`
			}{URL: url}}
		default:
			return nil, false
		}
		parts = append(parts, p)
	}
	out, err := json.Marshal(parts)
	return out, err == nil
}

// blockImageURL is an image block's URL: a Responses image_url, or a
// Messages source's url or data: URI.
func blockImageURL(bl apiBlock) (string, bool) {
	var url string
	if bl.Type == "input_image" {
		return url, json.Unmarshal(bl.ImageURL, &url) == nil && url != ""
	}
	var src struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	if json.Unmarshal(bl.Source, &src) != nil {
		return "", false
	}
	if src.Type == "url" {
		return src.URL, src.URL != ""
	}
	return "data:" + src.MediaType + ";base64," + src.Data, src.Type == "base64"
}
