package tokens

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// completionIndex indexes what a continuation edits in a completions
// answer or event: the choices, the usage.
var completionIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"choices": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{}}},
	"usage":   {},
}}

// readCompletion decodes a completions answer or event; what: which, for
// errors.
func readCompletion(data []byte, what string) (*completionAnswer, error) {
	var a completionAnswer
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
// asking cont once: only when the prompt's token IDs are known.
func (c *CompletionContinuation) holds(ch *completionRunChoice) bool {
	return ch != nil && !c.broken && c.prompt != nil && bytes.Equal(ch.FinishReason, abortSpelled) && c.cont()
}

// onlyCompletion is a's choice, nil when it has none.
func onlyCompletion(a *completionAnswer) *completionRunChoice {
	if len(a.Choices) == 0 {
		return nil
	}
	return &a.Choices[0]
}

// Answer takes a unary run's answer, the worker's body, and returns what
// to send: body itself unless a pause aborted the answer; nil while an
// abort is held back (Aborted); after a continuation, the first run's
// answer with choice 0's text all the text, its token_ids the whole
// output's, the finish_reason of the last run and its usage the client's
// prompt and every output token. An answer the continuation cannot read
// is relayed as it is on the first run, an error after.
func (c *CompletionContinuation) Answer(body []byte) ([]byte, error) {
	first := c.answer == nil
	if first && !bytes.Contains(body, abortSpelled) {
		return body, nil
	}
	a, err := readCompletion(body, "decode answer")
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
	c.collect(ch)
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
	var n uint32
	if a.Usage != nil {
		n = a.Usage.CompletionTokens
	}
	return c.merged(body, n)
}

// merged is the whole answer once the last run's (body, n tokens) came:
// the first run's answer with the output so far.
func (c *CompletionContinuation) merged(body []byte, n uint32) ([]byte, error) {
	answer, err := jsonbody.ParseIndexed(c.answer, completionIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	last, err := jsonbody.ParseIndexed(body, completionIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	ch := firstChoice(answer)
	ch.Set("text", jsonbody.AppendString(nil, string(c.text)))
	ch.Set("token_ids", jsonbody.AppendUint32s(nil, c.ids))
	if finish, ok := last.Array("choices").Object(0).Get("finish_reason"); ok {
		ch.Set("finish_reason", finish)
	}
	c.rewriteUsage(answer.EditObject("usage"), n)
	return answer.Bytes(), nil
}

// Event takes one event of a streamed run (its data) and returns the
// event to send, nil for none. A run no pause aborted goes out as the
// worker sent it. The event that ends a run with an abort held back goes
// out with finish_reason null (its text and tokens kept); the rest of
// that run (usage, [DONE]) does not go out. A continuation run's events
// carry the first run's id and created and no prompt_token_ids (the first
// run's were the client's); its usage is the whole answer's.
func (c *CompletionContinuation) Event(data []byte) ([]byte, error) {
	if string(data) == "[DONE]" {
		return c.unlessAborted(data), nil
	}
	a, err := readCompletion(data, "decode event")
	if err != nil {
		c.broken = true // relayed as sent: the worker's error event or a shape to pass on
		return c.unlessAborted(data), nil
	}
	if c.aborted { // the usage after the abort
		c.noteFirst(a, data)
		return nil, nil
	}
	ch := onlyCompletion(a)
	c.collect(ch)
	held := c.holds(ch)
	c.noteFirst(a, data)
	if !held && !c.next {
		return data, nil
	}
	return c.rewriteEvent(data, a, held)
}

// unlessAborted is data, or nil after an abort held back.
func (c *CompletionContinuation) unlessAborted(data []byte) []byte {
	if c.aborted {
		return nil
	}
	return data
}

// rewriteEvent writes the event data (read as a) as Event sends it; held:
// its abort is held back.
func (c *CompletionContinuation) rewriteEvent(data []byte, a *completionAnswer, held bool) ([]byte, error) {
	root, err := jsonbody.ParseIndexed(data, completionIndex)
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
	if ch := firstChoice(root); ch != nil {
		ch.Delete("prompt_token_ids")
	}
	if a.Usage != nil {
		c.rewriteUsage(root.EditObject("usage"), a.Usage.CompletionTokens)
	}
	return root.Bytes(), nil
}
