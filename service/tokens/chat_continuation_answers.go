package tokens

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// chatIndex indexes what a continuation edits in a chat answer or event:
// the choices, their message, delta and logprobs, the usage.
var chatIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"choices": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{"message": {}, "delta": {}, "logprobs": {}}}},
	"usage":   {},
}}

// readChat decodes a chat answer or event; what: which, for errors.
func readChat(data []byte, what string) (*chatAnswer, error) {
	var a chatAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if (len(a.Error) > 0 && !jsonbody.IsNull(a.Error)) || bool(a.Object) {
		return nil, fmt.Errorf("%s: an error", what)
	}
	if len(a.Choices) > 1 {
		return nil, fmt.Errorf("%s: %d choices to continue", what, len(a.Choices))
	}
	return &a, nil
}

// holds reports whether a run's choice ended with an abort to hold back,
// asking cont once.
func (c *ChatContinuation) holds(ch *chatRunChoice) bool {
	return ch != nil && !c.broken && bytes.Equal(ch.FinishReason, abortSpelled) && c.cont()
}

// only is a's choice, nil when it has none.
func only(a *chatAnswer) *chatRunChoice {
	if len(a.Choices) == 0 {
		return nil
	}
	return &a.Choices[0]
}

// Answer takes a unary run's answer, the worker's body, and returns what
// to send: body itself unless a pause aborted the answer; nil while an
// abort is held back (Aborted); after a continuation, the first run's
// answer with choice 0's message.content all the text, its
// logprobs.content and token_ids the whole output's, the finish_reason of
// the last run and its usage the client's prompt and every output token.
// An answer the continuation cannot read is relayed as it is on the first
// run, an error after.
func (c *ChatContinuation) Answer(body []byte) ([]byte, error) {
	first := c.answer == nil
	if first && !bytes.Contains(body, abortSpelled) {
		return body, nil
	}
	a, err := readChat(body, "decode answer")
	if err == nil && len(a.Choices) != 1 {
		err = fmt.Errorf("decode answer: %d choices to continue", len(a.Choices))
	}
	if err != nil {
		if first {
			return body, nil
		}
		return nil, err
	}
	ch := &a.Choices[0]
	c.collect(ch, a.Usage)
	held := c.holds(ch)
	if first && !held {
		return body, nil
	}
	if first {
		c.answer = body
		c.noteFirst(a, body)
	}
	if held {
		c.aborted = true
		return nil, nil
	}
	return c.merged(body)
}

// merged is the whole answer once the last run's (body) came: the first
// run's answer with the output so far.
func (c *ChatContinuation) merged(body []byte) ([]byte, error) {
	answer, err := jsonbody.ParseIndexed(c.answer, chatIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	last, err := jsonbody.ParseIndexed(body, chatIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	ch := firstChoice(answer)
	if msg := ch.EditObject("message"); msg != nil {
		msg.Set("content", jsonbody.AppendString(nil, string(c.text)))
	}
	if lp := ch.EditObject("logprobs"); lp != nil && c.content != nil {
		lp.Set("content", joinElements(c.content))
	}
	if raw, ok := ch.Get("token_ids"); ok && !jsonbody.IsNull(raw) {
		ch.Set("token_ids", jsonbody.AppendUint32s(nil, c.ids))
	}
	if finish, ok := last.Array("choices").Object(0).Get("finish_reason"); ok {
		ch.Set("finish_reason", finish)
	}
	c.rewriteUsage(answer.EditObject("usage"), uint32(max(c.usage, 0)))
	return answer.Bytes(), nil
}

// Event takes one event of a streamed run (its data) and returns the
// event to send, nil for none. A run no pause aborted goes out as the
// worker sent it. The event that ends a run with an abort held back goes
// out with finish_reason null (its tokens kept); the rest of that run
// (usage, [DONE]) does not go out. A continuation run's events carry the
// first run's id and created, no delta.role once the client has had one
// (the answer has one assistant message) and no prompt_token_ids (the
// first run's were the client's); one left with nothing to say does not
// go out; its usage is the whole answer's.
func (c *ChatContinuation) Event(data []byte) ([]byte, error) {
	if string(data) == "[DONE]" {
		return c.unlessAborted(data), nil
	}
	a, err := readChat(data, "decode event")
	if err != nil {
		c.broken = true // relayed as sent: the worker's error event or a shape to pass on
		return c.unlessAborted(data), nil
	}
	if c.aborted { // the usage after the abort
		c.collect(nil, a.Usage)
		c.noteFirst(a, data)
		return nil, nil
	}
	ch := only(a)
	c.collect(ch, a.Usage)
	held := c.holds(ch)
	c.noteFirst(a, data)
	hadRole := c.role
	c.role = c.role || (ch != nil && ch.Delta != nil && ch.Delta.Role != nil)
	if !held && !c.next {
		return data, nil
	}
	return c.rewriteEvent(data, a, held, hadRole)
}

// unlessAborted is data, or nil after an abort held back.
func (c *ChatContinuation) unlessAborted(data []byte) []byte {
	if c.aborted {
		return nil
	}
	return data
}

// rewriteEvent writes the event data (read as a) as Event sends it; held:
// its abort is held back; hadRole: the client has had the role before it.
func (c *ChatContinuation) rewriteEvent(data []byte, a *chatAnswer, held, hadRole bool) ([]byte, error) {
	root, err := jsonbody.ParseIndexed(data, chatIndex)
	if err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if held {
		c.aborted = true
		firstChoice(root).Set("finish_reason", []byte("null"))
	}
	if !c.next {
		return root.Bytes(), nil
	}
	c.first.stamp(root)
	root.Delete("prompt_token_ids")
	if ch := firstChoice(root); ch != nil && hadRole {
		if d := ch.EditObject("delta"); d != nil {
			d.Delete("role")
		}
	}
	if a.Usage != nil {
		c.rewriteUsage(root.EditObject("usage"), a.Usage.CompletionTokens)
	} else if !held && hadRole && silent(only(a)) {
		return nil, nil
	}
	return root.Bytes(), nil
}

// silent reports whether a continuation run's choice ch (its role
// dropped) has nothing to say: no content, token, logprob or finish
// reason.
func silent(ch *chatRunChoice) bool {
	if ch == nil {
		return false
	}
	empty := ch.Delta == nil || ch.Delta.Content == nil || *ch.Delta.Content == ""
	finish := len(ch.FinishReason) > 0 && !jsonbody.IsNull(ch.FinishReason)
	return empty && len(ch.TokenIDs) == 0 && (ch.Logprobs == nil || len(ch.Logprobs.Content) == 0) && !finish
}
