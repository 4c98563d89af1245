package tokens

import (
	"bytes"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// abortSpelled is how an answer that may have been aborted says so: an
// answer without it is relayed without being read.
var abortSpelled = []byte(`"abort"`)

// Answer takes a unary run's answer, the worker's body, and returns what
// to send: body itself unless a pause aborted the answer; nil while an
// abort is held back (Aborted); after a continuation, the first run's
// answer with choice 0's token_ids, logprobs.content, finish_reason and
// weight_versions the whole answer's and its usage rewritten (the
// client's prompt, every output token). An answer the continuation cannot
// read is relayed as it is on the first run, an error after.
func (g *GenerateContinuation) Answer(body []byte) ([]byte, error) {
	first := g.answer == nil
	if first && !bytes.Contains(body, abortSpelled) {
		return body, nil
	}
	a, err := readAnswer(body, "decode answer", &g.sc)
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
	g.collect(ch.TokenIDs)
	held := g.holds(ch)
	if first && !held {
		return body, nil
	}
	root, err := jsonbody.ParseIndexed(body, answerIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	if err := g.addContent(root, first); err != nil {
		return nil, err
	}
	if first {
		g.answer = body
		g.noteFirst(a.Usage, root)
	}
	if held {
		g.spans = joinSpans(g.spans, g.runSpans(ch), g.base)
		g.aborted = true
		return nil, nil
	}
	return g.merged(root, ch, a.Usage)
}

// addContent keeps the logprob entries of a run's answer: the first run's
// says whether the answer has logprobs.
func (g *GenerateContinuation) addContent(root *jsonbody.Object, first bool) error {
	if !first && g.content == nil {
		return nil
	}
	ch := root.Array("choices").Object(0)
	lp := ch.Object("logprobs")
	if lp == nil {
		return nil
	}
	raw, ok := lp.Get("content")
	if !ok || jsonbody.IsNull(raw) {
		return nil
	}
	elems, err := jsonbody.ParseArray(raw)
	if err != nil {
		return fmt.Errorf("decode answer: logprobs.content: %w", err)
	}
	if g.content == nil {
		g.content = make([][]byte, 0, len(elems))
	}
	g.content = append(g.content, elems...)
	return nil
}

// merged is the whole answer once the last run's (root, its choice ch and
// usage u) came: the first run's answer with the output so far.
func (g *GenerateContinuation) merged(root *jsonbody.Object, ch *generateChoice, u *generateUsage) ([]byte, error) {
	answer, err := jsonbody.ParseIndexed(g.answer, answerIndex)
	if err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	c := firstChoice(answer)
	c.Set("token_ids", jsonbody.AppendUint32s(nil, g.output))
	if lp := c.EditObject("logprobs"); lp != nil && g.content != nil {
		lp.Set("content", joinElements(g.content))
	}
	if finish, ok := root.Array("choices").Object(0).Get("finish_reason"); ok {
		c.Set("finish_reason", finish)
	}
	if len(g.spans) > 0 || len(ch.WeightVersions) > 0 {
		c.Set("weight_versions", g.wholeSpans(ch))
	}
	g.rewriteUsage(answer.EditObject("usage"), u)
	return answer.Bytes(), nil
}

// joinElements writes JSON values as one array.
func joinElements(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	b := append(make([]byte, 0, n), '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// Event takes one event of a streamed run (its data) and returns the
// event to send, nil for none. A run no pause aborted goes out as the
// worker sent it. The event that ends a run with an abort held back goes
// out with finish_reason null and without its weight_versions (the
// answer's end has them); the rest of that run (usage, [DONE]) does not
// go out. A continuation run's events name the first run's request_id;
// its last event's weight_versions are the whole output's, and its usage
// is the whole answer's. Every event's token IDs are kept.
func (g *GenerateContinuation) Event(data []byte) ([]byte, error) {
	if string(data) == "[DONE]" {
		return g.unlessAborted(data), nil
	}
	a, err := readAnswer(data, "decode event", &g.sc)
	if err != nil || len(a.Choices) > 1 {
		g.broken = true // relayed as sent: the worker's error event or a shape to pass on
		return g.unlessAborted(data), nil
	}
	if g.aborted { // the usage after the abort
		if root, err := jsonbody.ParseIndexed(data, answerIndex); err == nil {
			g.noteFirst(a.Usage, root)
		}
		return nil, nil
	}
	var ch *generateChoice
	if len(a.Choices) == 1 {
		ch = &a.Choices[0]
		g.collect(ch.TokenIDs)
	}
	held := g.holds(ch)
	if !held && g.base == 0 {
		return data, nil
	}
	return g.rewriteEvent(data, ch, a.Usage, held)
}

// unlessAborted is data, or nil after an abort held back.
func (g *GenerateContinuation) unlessAborted(data []byte) []byte {
	if g.aborted {
		return nil
	}
	return data
}

// rewriteEvent writes the event data, whose choice is ch (nil: none) and
// usage u, as Event sends it; held: its abort is held back.
func (g *GenerateContinuation) rewriteEvent(data []byte, ch *generateChoice, u *generateUsage, held bool) ([]byte, error) {
	root, err := jsonbody.ParseIndexed(data, answerIndex)
	if err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if id, ok := root.Get("request_id"); ok {
		if g.requestID == nil {
			g.requestID = bytes.Clone(id) // the first run's, as its first events named it
		} else {
			root.Set("request_id", g.requestID)
		}
	}
	if held {
		g.spans = joinSpans(g.spans, g.runSpans(ch), g.base)
		g.aborted = true
		c := firstChoice(root)
		c.Set("finish_reason", []byte("null"))
		c.Delete("weight_versions")
		return root.Bytes(), nil
	}
	if ch != nil && (ch.FinishReason != 0 || len(ch.WeightVersions) > 0) {
		firstChoice(root).Set("weight_versions", g.wholeSpans(ch))
	}
	if u != nil {
		g.rewriteUsage(root.EditObject("usage"), u)
	}
	return root.Bytes(), nil
}
