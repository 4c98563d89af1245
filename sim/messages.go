package sim

import "encoding/json"

// The Anthropic Messages API as vLLM serves it on POST /v1/messages
// (vllm/entrypoints/anthropic/protocol.py): a message with one text block,
// usage with cache_read_input_tokens (with --enable-prompt-tokens-details),
// and the prefill's kv_transfer_params.

type messagesResponse struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          []messagesBlock `json:"content"`
	Model            string          `json:"model"`
	StopReason       *string         `json:"stop_reason"`
	StopSequence     *string         `json:"stop_sequence"`
	Usage            messagesUsage   `json:"usage"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params,omitempty"`
}

type messagesBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type messagesUsage struct {
	InputTokens          int  `json:"input_tokens"`
	OutputTokens         int  `json:"output_tokens"`
	CacheReadInputTokens *int `json:"cache_read_input_tokens,omitempty"`
}

// stopReason is Anthropic's name of the finish reason.
func (g *generation) stopReason() string {
	if g.finish == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func (g *generation) messagesUsage(output int) messagesUsage {
	u := messagesUsage{InputTokens: g.promptTokens, OutputTokens: output}
	if g.details {
		cached := g.cached
		u.CacheReadInputTokens = &cached
	}
	return u
}

// messagesBody is the whole answer.
func (g *generation) messagesBody() messagesResponse {
	stop := g.stopReason()
	return messagesResponse{ID: g.id, Type: "message", Role: "assistant", Model: g.model,
		Content: []messagesBlock{{Type: "text", Text: g.text(0)}}, StopReason: &stop,
		Usage: g.messagesUsage(g.tokens), KVTransferParams: g.kv}
}

// messagesStream writes the Messages events: message_start (usage with the
// prompt's counts), content_block_start, one content_block_delta per
// token, content_block_stop, message_delta (stop_reason, output_tokens),
// message_stop.
type messagesStream struct{ g *generation }

type messagesEvent struct {
	Type         string            `json:"type"`
	Message      *messagesResponse `json:"message,omitempty"`
	Index        *int              `json:"index,omitempty"`
	ContentBlock *messagesBlock    `json:"content_block,omitempty"`
	Delta        any               `json:"delta,omitempty"`
	Usage        *messagesUsage    `json:"usage,omitempty"`
}

type messagesTextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type messagesStop struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

func (s *messagesStream) open(b []byte) []byte {
	start := messagesResponse{ID: s.g.id, Type: "message", Role: "assistant", Model: s.g.model,
		Content: []messagesBlock{}, Usage: s.g.messagesUsage(0)}
	b = appendNamedEvent(b, "message_start", messagesEvent{Type: "message_start", Message: &start})
	return appendNamedEvent(b, "content_block_start", messagesEvent{Type: "content_block_start", Index: &zero,
		ContentBlock: &messagesBlock{Type: "text", Text: ""}})
}

func (s *messagesStream) delta(b []byte, i int) []byte {
	return appendNamedEvent(b, "content_block_delta", messagesEvent{Type: "content_block_delta", Index: &zero,
		Delta: messagesTextDelta{Type: "text_delta", Text: s.g.word(0, i).text}})
}

func (s *messagesStream) close(b []byte) []byte {
	b = appendNamedEvent(b, "content_block_stop", messagesEvent{Type: "content_block_stop", Index: &zero})
	u := s.g.messagesUsage(s.g.tokens)
	b = appendNamedEvent(b, "message_delta", messagesEvent{Type: "message_delta",
		Delta: messagesStop{StopReason: s.g.stopReason()}, Usage: &u})
	return appendNamedEvent(b, "message_stop", messagesEvent{Type: "message_stop"})
}
