package sim

import "encoding/json"

// The OpenAI Responses API as vLLM serves it on POST /v1/responses
// (vllm/entrypoints/openai/responses/protocol.py): a response object with
// one assistant message of output_text, usage with input_tokens_details.
// cached_tokens always present, and no kv_transfer_params (the request has
// no such field: vLLM ignores extra fields).

type responsesResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Model             string             `json:"model"`
	Status            string             `json:"status"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Error             json.RawMessage    `json:"error"`
	Output            []responsesItem    `json:"output"`
	Usage             *responsesUsage    `json:"usage"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responsesItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Status  string          `json:"status"`
	Content []responsesPart `json:"content"`
}

type responsesPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responsesUsage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  responsesInputUsage `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails responsesOutUsage   `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

type responsesInputUsage struct {
	CachedTokens int `json:"cached_tokens"`
}

type responsesOutUsage struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// responsesBody is the whole answer: status completed, or incomplete
// (max_output_tokens) when the output bound ended it.
func (g *generation) responsesBody() responsesResponse {
	r := g.responsesHead("completed")
	r.Output = []responsesItem{g.responsesItem("completed", g.text(0))}
	if g.finish == "length" {
		r.Status, r.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	}
	u := g.usage()
	r.Usage = &responsesUsage{InputTokens: u.PromptTokens, InputTokensDetails: responsesInputUsage{CachedTokens: g.cached},
		OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	return r
}

func (g *generation) responsesHead(status string) responsesResponse {
	return responsesResponse{ID: g.id, Object: "response", CreatedAt: g.created, Model: g.model, Status: status,
		Error: json.RawMessage("null"), Output: []responsesItem{}}
}

func (g *generation) responsesItem(status, text string) responsesItem {
	item := responsesItem{ID: "msg_" + g.id, Type: "message", Role: "assistant", Status: status, Content: []responsesPart{}}
	if status == "completed" {
		item.Content = []responsesPart{{Type: "output_text", Text: text, Annotations: []any{}}}
	}
	return item
}

// responsesStream writes the Responses events: response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, one response.output_text.delta per token,
// response.output_text.done, response.content_part.done,
// response.output_item.done, response.completed (with usage), each with
// its sequence_number.
type responsesStream struct {
	g   *generation
	seq int
}

// responsesEvent is every field a Responses stream event here may carry.
type responsesEvent struct {
	Type           string             `json:"type"`
	SequenceNumber int                `json:"sequence_number"`
	Response       *responsesResponse `json:"response,omitempty"`
	OutputIndex    *int               `json:"output_index,omitempty"`
	ContentIndex   *int               `json:"content_index,omitempty"`
	ItemID         string             `json:"item_id,omitempty"`
	Item           *responsesItem     `json:"item,omitempty"`
	Part           *responsesPart     `json:"part,omitempty"`
	Delta          *string            `json:"delta,omitempty"`
	Text           *string            `json:"text,omitempty"`
	Logprobs       []any              `json:"logprobs,omitempty"`
}

var zero = 0

func (s *responsesStream) event(b []byte, e responsesEvent) []byte {
	e.SequenceNumber = s.seq
	s.seq++
	return appendNamedEvent(b, e.Type, e)
}

// inItem is an event about the message's text part.
func (s *responsesStream) inItem(t string) responsesEvent {
	return responsesEvent{Type: t, OutputIndex: &zero, ContentIndex: &zero, ItemID: "msg_" + s.g.id}
}

func (s *responsesStream) open(b []byte) []byte {
	head := s.g.responsesHead("in_progress")
	b = s.event(b, responsesEvent{Type: "response.created", Response: &head})
	b = s.event(b, responsesEvent{Type: "response.in_progress", Response: &head})
	item := s.g.responsesItem("in_progress", "")
	b = s.event(b, responsesEvent{Type: "response.output_item.added", OutputIndex: &zero, Item: &item})
	e := s.inItem("response.content_part.added")
	e.Part = &responsesPart{Type: "output_text", Text: "", Annotations: []any{}}
	return s.event(b, e)
}

func (s *responsesStream) delta(b []byte, i int) []byte {
	e := s.inItem("response.output_text.delta")
	text := s.g.word(0, i).text
	e.Delta, e.Logprobs = &text, []any{}
	return s.event(b, e)
}

func (s *responsesStream) close(b []byte) []byte {
	text := s.g.text(0)
	e := s.inItem("response.output_text.done")
	e.Text, e.Logprobs = &text, []any{}
	b = s.event(b, e)
	e = s.inItem("response.content_part.done")
	e.Part = &responsesPart{Type: "output_text", Text: text, Annotations: []any{}}
	b = s.event(b, e)
	item := s.g.responsesItem("completed", text)
	b = s.event(b, responsesEvent{Type: "response.output_item.done", OutputIndex: &zero, Item: &item})
	final := s.g.responsesBody()
	return s.event(b, responsesEvent{Type: "response.completed", Response: &final})
}
