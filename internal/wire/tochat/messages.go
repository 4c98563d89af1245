package tochat

import (
	"encoding/json"
	"strings"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// billingHeader starts the system text block Claude Code adds per request;
// vLLM drops it (its hash would defeat prefix caching), and so does this.
const billingHeader = "x-anthropic-billing-header"

// messagesBody is what the conversion reads of a Messages body.
type messagesBody struct {
	Model      json.RawMessage   `json:"model"`
	System     json.RawMessage   `json:"system"`
	Messages   []messagesMessage `json:"messages"`
	Tools      []messagesTool    `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is a Messages content block, the members the conversion reads.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    json.RawMessage `json:"source"`
	Thinking  *string         `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type messagesTool struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Messages is the chat body vLLM renders for the Messages body (or a
// count_tokens body) body: the system text joined into one system message
// (the top-level "system" then the messages of role system), each other
// message with its text and images as content, its thinking as
// "reasoning", its tool_use blocks as tool_calls, a user's tool_result as
// a tool message (and its images as a user message after it); the tools
// as functions, tool_choice as chat's.
func Messages(body []byte) ([]byte, error) {
	var in messagesBody
	if err := decode(body, &in, "messages body"); err != nil {
		return nil, err
	}
	out := chatBody{Model: in.Model, ChatTemplateKwargs: in.ChatTemplateKwargs}
	system, err := systemText(in)
	if err != nil {
		return nil, err
	}
	if system != "" {
		out.Messages = append(out.Messages, message{Role: "system", Content: system})
	}
	for _, m := range in.Messages {
		if m.Role == "system" {
			continue
		}
		if out.Messages, err = appendMessage(out.Messages, m); err != nil {
			return nil, err
		}
	}
	convertTools(&out, in)
	return encode(&out)
}

// systemText joins the system prompt's text blocks, the top-level
// "system"'s then those of the messages of role system.
func systemText(in messagesBody) (string, error) {
	var b strings.Builder
	add := func(raw json.RawMessage) error {
		if s, ok := stringOf(raw); ok {
			b.WriteString(s)
			return nil
		}
		if isNull(raw) {
			return nil
		}
		var blocks []block
		if err := decode(raw, &blocks, "system"); err != nil {
			return err
		}
		for _, bl := range blocks {
			if bl.Type == "text" && bl.Text != "" && !strings.HasPrefix(bl.Text, billingHeader) {
				b.WriteString(bl.Text)
			}
		}
		return nil
	}
	if err := add(in.System); err != nil {
		return "", err
	}
	for _, m := range in.Messages {
		if m.Role == "system" {
			if err := add(m.Content); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

// appendMessage appends m's chat messages: m itself (unless a user's
// message left without content: its tool_results became tool messages),
// after the tool messages its blocks made.
func appendMessage(msgs []message, m messagesMessage) ([]message, error) {
	out := message{Role: m.Role}
	if s, ok := stringOf(m.Content); ok {
		out.Content = s
		return append(msgs, out), nil
	}
	var blocks []block
	if err := decode(m.Content, &blocks, "content"); err != nil {
		return nil, err
	}
	var parts []part
	var reasoning []string
	for _, b := range blocks {
		var err error
		switch b.Type {
		case "text":
			if b.Text != "" {
				parts = append(parts, textPart(b.Text))
			}
		case "image":
			parts = append(parts, imagePart(sourceURL(b.Source)))
		case "thinking":
			if b.Thinking != nil {
				reasoning = append(reasoning, *b.Thinking)
			}
		case "tool_use":
			err = appendToolCall(&out, b)
		case "tool_result":
			msgs, parts = toolResult(msgs, parts, b, m.Role)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(reasoning) > 0 {
		r := strings.Join(reasoning, "")
		out.Reasoning = &r
	}
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		out.Content = *parts[0].Text
	case len(parts) > 0:
		out.Content = parts
	}
	if m.Role == "user" && out.Content == nil {
		return msgs, nil
	}
	return append(msgs, out), nil
}

// appendToolCall adds a tool_use block to m's tool calls, its input as
// Python's json.dumps writes it.
func appendToolCall(m *message, b block) error {
	args := "{}"
	if !isNull(b.Input) && !isEmptyObject(b.Input) {
		var err error
		if args, err = pythonJSON(b.Input); err != nil {
			return legs.Invalidf("tool_use.input: %v", err)
		}
	}
	m.ToolCalls = append(m.ToolCalls, toolCall{ID: b.ID, Type: "function", Function: functionCall{Name: b.Name, Arguments: args}})
	return nil
}

func isEmptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) == 0
}

// toolResult converts a tool_result block: a user's becomes a tool message
// (its text blocks joined by newlines) and, with images, a user message of
// them after it; another role's a text part "Tool result: ...".
func toolResult(msgs []message, parts []part, b block, role string) ([]message, []part) {
	if role != "user" {
		text := ""
		if s, ok := stringOf(b.Content); ok {
			text = s
		} else if !isNull(b.Content) {
			text = string(b.Content) // vLLM writes Python's str() of the list here
		}
		return msgs, append(parts, textPart("Tool result: "+text))
	}
	text, images := toolResultContent(b.Content)
	id := b.ToolUseID
	msgs = append(msgs, message{Role: "tool", ToolCallID: &id, Content: text})
	if len(images) > 0 {
		msgs = append(msgs, message{Role: "user", Content: images})
	}
	return msgs, parts
}

// toolResultContent is a tool_result's text (a string, or its text items
// joined by newlines) and image parts.
func toolResultContent(raw json.RawMessage) (string, []part) {
	if s, ok := stringOf(raw); ok {
		return s, nil
	}
	var items []block
	if json.Unmarshal(raw, &items) != nil {
		return "", nil
	}
	var texts []string
	var images []part
	for _, it := range items {
		switch it.Type {
		case "text":
			texts = append(texts, it.Text)
		case "image":
			if url := sourceURL(it.Source); url != "" {
				images = append(images, imagePart(url))
			}
		}
	}
	return strings.Join(texts, "\n"), images
}

// sourceURL is an image source as a URL: its url, or a data: URI of its
// base64 data (media type image/jpeg when none is named, as vLLM).
func sourceURL(raw json.RawMessage) string {
	var s struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	_ = json.Unmarshal(raw, &s) // checked before (requestbody)
	if s.Type == "url" {
		return s.URL
	}
	if s.MediaType == "" {
		s.MediaType = "image/jpeg"
	}
	return "data:" + s.MediaType + ";base64," + s.Data
}

// convertTools writes the tools as chat functions and tool_choice as
// chat's ("any" is "required", a named tool a function choice; "auto" when
// tools come without one).
func convertTools(out *chatBody, in messagesBody) {
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
			out.ToolChoice = tc.Type
		case "any":
			out.ToolChoice = "required"
		case "tool":
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
	}
	if in.Tools == nil {
		return
	}
	out.Tools = make([]tool, 0, len(in.Tools))
	for _, t := range in.Tools {
		out.Tools = append(out.Tools, tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if out.ToolChoice == nil {
		out.ToolChoice = "auto"
	}
}
