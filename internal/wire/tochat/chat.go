// Package tochat turns an Anthropic Messages or OpenAI Responses body into
// the chat completions body vLLM builds from it before it applies the chat
// template, so that the render service, which renders chat and
// completions only, can tokenize the same prompt the workers will: vLLM's
// AnthropicServingMessages._convert_anthropic_to_openai_request
// (vllm/entrypoints/anthropic/serving.py) and construct_input_messages
// (vllm/entrypoints/openai/responses/utils.py). Only what reaches the
// template is kept: the model, the messages, the tools and
// chat_template_kwargs; no sampling field.
//
// The bodies were checked first (requestbody): a shape the checks let
// through but the conversion cannot read is an error of legs.Invalidf.
// This is no hot path (token counting only), so the body is decoded with
// encoding/json and the chat body encoded anew.
package tochat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// chatBody is the chat completions body the conversion writes.
type chatBody struct {
	Model              json.RawMessage `json:"model,omitempty"`
	Messages           []message       `json:"messages"`
	Tools              []tool          `json:"tools,omitempty"`
	ToolChoice         any             `json:"tool_choice,omitempty"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
}

// message is one chat message. Content is a string or []part; nil leaves
// it out.
type message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content,omitempty"`
	Reasoning  *string    `json:"reasoning,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID *string    `json:"tool_call_id,omitempty"`
}

// part is a chat content part: text or image_url.
type part struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

func textPart(s string) part { return part{Type: "text", Text: &s} }

func imagePart(url string) part { return part{Type: "image_url", ImageURL: &imageURL{URL: url}} }

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// tool is a chat tool: a function.
type tool struct {
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// encode writes b as the chat body.
func encode(b *chatBody) ([]byte, error) {
	if b.Messages == nil {
		b.Messages = []message{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("tochat: encode: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decode reads body into v; a failure is the client's (the checks passed a
// shape the conversion cannot read).
func decode(body []byte, v any, what string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return legs.Invalidf("%s: %v", what, err)
	}
	return nil
}

// isNull reports whether raw is missing or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// stringOf is raw as a string, ok false for another JSON value.
func stringOf(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(t, &s) != nil {
		return "", false
	}
	return s, true
}

// pythonJSON writes raw, a JSON value, as Python's json.dumps does (what
// vLLM makes of a tool_use block's input): ", " and ": " between members,
// non-ASCII characters as \u escapes, member order kept. Numbers are kept
// as written.
func pythonJSON(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := writePython(dec, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

func writePython(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing, sep := byte(']'), ", "
		if t == '{' {
			closing = '}'
		}
		out.WriteByte(byte(t))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				out.WriteString(sep)
			}
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				writePythonString(out, key.(string))
				out.WriteString(": ")
			}
			if err := writePython(dec, out); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		out.WriteByte(closing)
	case string:
		writePythonString(out, t)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		out.WriteString(strconv.FormatBool(t))
	case nil:
		out.WriteString("null")
	}
	return nil
}

// writePythonString writes s as json.dumps with ensure_ascii does.
func writePythonString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			out.WriteByte('\\')
			out.WriteRune(r)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r == '\b':
			out.WriteString(`\b`)
		case r == '\f':
			out.WriteString(`\f`)
		case r < 0x20 || r > 0x7f:
			writeEscaped(out, r)
		default:
			out.WriteRune(r)
		}
	}
	out.WriteByte('"')
}

// writeEscaped writes r as \uXXXX, a surrogate pair past the BMP.
func writeEscaped(out *bytes.Buffer, r rune) {
	if r > 0xffff {
		r -= 0x10000
		fmt.Fprintf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		return
	}
	fmt.Fprintf(out, `\u%04x`, r)
}
