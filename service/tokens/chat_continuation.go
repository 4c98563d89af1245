package tokens

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// ChatContinuation is GenerateContinuation for a chat completion: the
// client's OpenAI chat body, whose decode answer the service relays as
// the worker sent it. A chat answer carries text, so the run that goes on
// after a pause is vLLM's own continuation of a chat: the client's
// messages and one more, the assistant's, holding all the text generated
// so far, with "continue_final_message": true and
// "add_generation_prompt": false (NextBody); the model goes on with that
// message. The runs' answers read as one: a unary answer merged (Answer),
// a stream's events adapted as they pass (Event). An answer no pause
// aborted is relayed byte for byte.
//
// Only a chat whose output is one plain text whose token count the
// answer tells is continued (ChatContinuable): the budget left is
// max_tokens less that count.
type ChatContinuation struct {
	// doc is the client's document as the first run got it (the service's
	// copy, which no step edits).
	doc  *jsonbody.Object
	cont func() bool
	// maxOutput bounds what is kept of the output (text, token ids,
	// logprob entries) in bytes (gateway.max_answer_size); past it the
	// request is no longer continued.
	maxOutput int
	kept      int
	// text is the content generated so far; ids its token_ids
	// (return_token_ids) and content its logprob entries (nil: none).
	text    []byte
	ids     []uint32
	content [][]byte
	// base is the tokens generated before the current run; counted and
	// usage are the current run's, as its token_ids or logprob entries and
	// its usage count them (usage -1: none came); perToken: the answer
	// has token_ids or logprobs, counted is a count.
	base, counted, usage int
	perToken             bool
	// first is what the answer takes of the first run's.
	first firstRun
	// aborted: the current run ended with an abort held back. broken: an
	// answer the continuation cannot follow: no abort is held back any
	// more. next: a continuation run is under way. role: the client has
	// had the message's role (a delta's).
	aborted, broken, next, role bool
	// answer is a unary call's first answer.
	answer []byte
}

// chatAnswer is what a continuation reads of a chat answer or stream
// event (vLLM's ChatCompletionResponse, ChatCompletionStreamResponse).
type chatAnswer struct {
	ID      json.RawMessage `json:"id"`
	Created json.RawMessage `json:"created"`
	Choices []chatRunChoice `json:"choices"`
	Usage   *generateUsage  `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  errorKind       `json:"object"`
}

type chatRunChoice struct {
	Message  *chatText `json:"message"`
	Delta    *chatText `json:"delta"`
	Logprobs *struct {
		Content []json.RawMessage `json:"content"`
	} `json:"logprobs"`
	FinishReason json.RawMessage `json:"finish_reason"`
	TokenIDs     []uint32        `json:"token_ids"`
}

// chatText is a message or delta: its content, and what a continuation
// cannot carry over (tool calls, reasoning).
type chatText struct {
	Role             *string         `json:"role"`
	Content          *string         `json:"content"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
}

// plain reports whether t is text alone: no tool call, no reasoning.
func (t *chatText) plain() bool {
	calls := bytes.TrimSpace(t.ToolCalls)
	return (len(calls) == 0 || jsonbody.IsNull(calls) || string(calls) == "[]") &&
		(t.ReasoningContent == nil || *t.ReasoningContent == "") && (t.Reasoning == nil || *t.Reasoning == "")
}

// chatRefusals are the members of a chat body that make it not
// continuable when set (not null): tools and structured output, whose
// output is not text to continue; a client's own tokens or continuation.
var chatRefusals = []string{"tools", "functions", "structured_outputs", "guided_json", "guided_regex",
	"guided_choice", "guided_grammar", bodykeys.Tokens, "continue_final_message"}

// ChatContinuable reports whether the chat body root can be continued: n
// at most 1; no tools or functions, no structured output
// (response_format other than text, structured_outputs, guided_*), no
// echo, no tokens of the client's, not a continuation of the client's
// own (continue_final_message, add_generation_prompt false); and the
// answer tells how many tokens it has: a unary one by its usage, a stream
// when it carries usage (stream_options.include_usage), token_ids
// (return_token_ids) or logprobs (one entry a token).
func ChatContinuable(root *jsonbody.Object, stream bool) bool {
	for _, k := range chatRefusals {
		if raw, ok := root.Get(k); ok && !jsonbody.IsNull(raw) && !isFalse(raw) {
			return false
		}
	}
	if !atMostOne(root, bodykeys.N) || !budgetsReadable(root, bodykeys.MaxTokens, bodykeys.MaxCompletionTokens, "min_tokens") {
		return false
	}
	if isTrue(root, bodykeys.Echo) || isFalseMember(root, "add_generation_prompt") || !textFormat(root) {
		return false
	}
	if !stream {
		return true
	}
	if so := objectOf(root, bodykeys.StreamOptions); so != nil && isTrue(so, "include_usage") {
		return true
	}
	return isTrue(root, "return_token_ids") || isTrue(root, bodykeys.Logprobs)
}

// textFormat reports whether response_format is absent, null or text.
func textFormat(root *jsonbody.Object) bool {
	raw, ok := root.Get("response_format")
	if !ok || jsonbody.IsNull(raw) {
		return true
	}
	rf := objectOf(root, "response_format")
	if rf == nil {
		return false
	}
	t, _ := rf.String("type")
	return t == "text"
}

// objectOf is the object value of key in o, indexed or not; nil when it
// is none.
func objectOf(o *jsonbody.Object, key string) *jsonbody.Object {
	if v := o.Object(key); v != nil {
		return v
	}
	raw, ok := o.Get(key)
	if !ok {
		return nil
	}
	v, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil
	}
	return v
}

func isTrue(o *jsonbody.Object, key string) bool {
	raw, ok := o.Get(key)
	v, isBool := jsonbody.Bool(raw)
	return ok && isBool && v
}

func isFalseMember(o *jsonbody.Object, key string) bool {
	raw, ok := o.Get(key)
	return ok && isFalse(raw)
}

func isFalse(raw []byte) bool {
	v, ok := jsonbody.Bool(raw)
	return ok && !v
}

// NewChatContinuation starts carrying the chat whose document (as the
// first run gets it) is doc, which the caller no longer edits; cont
// decides each abort; maxBytes bounds what is kept of the output.
func NewChatContinuation(doc *jsonbody.Object, cont func() bool, maxBytes int64) *ChatContinuation {
	return &ChatContinuation{doc: doc, cont: cont, maxOutput: int(min(maxBytes, 1<<31)), usage: -1,
		perToken: isTrue(doc, "return_token_ids") || isTrue(doc, bodykeys.Logprobs)}
}

// Aborted reports whether the last run ended with an abort held back: the
// request is to run again (NextBody) once the fleet resumes.
func (c *ChatContinuation) Aborted() bool { return c.aborted }

// Generated is how many tokens the answer has so far: the current run's
// as its usage counts them, else as its token_ids or logprobs do.
func (c *ChatContinuation) Generated() int {
	if c.usage >= 0 {
		return c.base + c.usage
	}
	return c.base + c.counted
}

// errUncounted is a held abort whose run never said how many tokens it
// had (a stream whose usage event did not come).
var errUncounted = errors.New("continuation: the aborted answer did not count its tokens")

// NextBody is the body that continues the answer: the client's document
// with one more message, {"role":"assistant","content":<the text so
// far>}, "continue_final_message": true, "add_generation_prompt": false,
// max_tokens, max_completion_tokens and min_tokens less the output,
// prompt_logprobs removed (the first run's answer has them) and no
// transfer params (they were the first run's); the rest as the client
// sent it. It starts a new run.
func (c *ChatContinuation) NextBody() ([]byte, error) {
	if c.usage < 0 && !c.perToken {
		return nil, errUncounted
	}
	raw, _ := c.doc.Get(bodykeys.Messages)
	msgs := bytes.TrimSpace(raw)
	if len(msgs) < 2 || msgs[0] != '[' || msgs[len(msgs)-1] != ']' {
		return nil, errors.New("continuation: messages: not an array")
	}
	next := make([]byte, 0, len(msgs)+len(c.text)+48)
	next = append(next, msgs[:len(msgs)-1]...)
	if len(bytes.TrimSpace(msgs[1:len(msgs)-1])) > 0 {
		next = append(next, ',')
	}
	next = append(next, `{"role":"assistant","content":`...)
	next = jsonbody.AppendString(next, string(c.text))
	next = append(next, "}]"...)
	done := int64(c.Generated())
	body := c.doc.Clone()
	body.Set(bodykeys.Messages, next)
	body.Set("continue_final_message", []byte("true"))
	body.Set("add_generation_prompt", []byte("false"))
	lessOutput(body, bodykeys.MaxTokens, done, 1)
	lessOutput(body, bodykeys.MaxCompletionTokens, done, 1)
	lessOutput(body, "min_tokens", done, 0)
	body.Delete(bodykeys.PromptLogprobs)
	requestbody.DropTransferParams(body)
	c.base, c.counted, c.usage = int(done), 0, -1
	c.aborted, c.next = false, true
	return body.Bytes(), nil
}

// collect takes in a run's choice and usage: its text, token ids and
// logprob entries, and how many tokens they are. Past maxOutput, or on an
// answer that is not plain text, the continuation stops following it.
func (c *ChatContinuation) collect(ch *chatRunChoice, u *generateUsage) {
	if u != nil {
		c.usage = int(u.CompletionTokens)
	}
	if ch == nil || c.broken {
		return
	}
	t := ch.Message
	if t == nil {
		t = ch.Delta
	}
	if t != nil && !t.plain() {
		c.broken = true
		return
	}
	if t != nil && t.Content != nil {
		c.text = append(c.text, *t.Content...)
		c.kept += len(*t.Content)
	}
	c.addTokens(ch)
	if c.kept > c.maxOutput {
		c.broken, c.text, c.ids, c.content = true, nil, nil, nil
	}
}

// addTokens keeps a choice's token_ids and logprob entries and counts its
// tokens by them.
func (c *ChatContinuation) addTokens(ch *chatRunChoice) {
	if ch.TokenIDs != nil {
		c.ids = append(c.ids, ch.TokenIDs...)
		c.kept += 4 * len(ch.TokenIDs)
	}
	var entries []json.RawMessage
	if ch.Logprobs != nil {
		entries = ch.Logprobs.Content
	}
	for _, e := range entries {
		c.content = append(c.content, e)
		c.kept += len(e)
	}
	switch {
	case ch.TokenIDs != nil:
		c.counted += len(ch.TokenIDs)
	case entries != nil:
		c.counted += len(entries)
	}
}

// noteFirst keeps what the whole answer takes of the first run's (a, read
// of data).
func (c *ChatContinuation) noteFirst(a *chatAnswer, data []byte) {
	if !c.next {
		c.first.note(a.ID, a.Created, a.Usage, data, chatIndex)
	}
}

// rewriteUsage makes usage, a continuation run's (completion tokens n),
// the whole answer's.
func (c *ChatContinuation) rewriteUsage(usage *jsonbody.Object, n uint32) {
	c.first.usage.rewrite(usage, uint64(c.base)+uint64(n))
}
