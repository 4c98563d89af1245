package pd

import (
	"bytes"
	"unicode/utf8"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// This file merges a completions echo (echo with logprobs) into the decode
// worker's answer after P/D (D22). The prefill leg asks vLLM's "echo
// without generation" and so answers exactly the prompt's text and its
// CompletionLogProbs; the decode leg runs without echo. vLLM's aggregated
// answer is then rebuilt as vLLM writes it:
//
//   - whole answer: each choice's text is the prompt's text then the
//     generated text, and its logprobs arrays the prompt's then the
//     generated tokens', whose text_offset continue from the prompt's
//     tokens (offset of the last prompt token plus its length);
//   - stream: the first event of each choice is prefixed the same way;
//     the later events' text_offset move by the prompt text's length, as
//     vLLM counts a stream's offsets from the text sent so far.
//
// Lengths are in code points, as Python counts them.

// Members of vLLM's CompletionLogProbs.
const (
	keyText          = "text"
	keyTextOffset    = "text_offset"
	keyTokenLogprobs = "token_logprobs"
	keyTokensList    = "tokens"
	keyTopLogprobs   = "top_logprobs"
)

// EchoPrompt is the prompt as the prefill worker echoed it.
type EchoPrompt struct {
	// Text is the prompt's text.
	Text string
	// logprobs holds the prompt's CompletionLogProbs arrays, raw; nil when
	// the echo had none.
	logprobs *echoLogprobs
	// tokenShift is the text_offset of the first token after the prompt in
	// a whole answer (and a stream's first event).
	tokenShift int64
	// textShift is Text's length: how far a stream's later offsets move.
	textShift int64
}

// echoLogprobs are the four arrays of a CompletionLogProbs, raw.
type echoLogprobs struct {
	textOffset, tokenLogprobs, tokens, topLogprobs []byte
}

// readEcho reads a completions prefill choice that echoed the prompt with
// logprobs (the only one whose logprobs is an object: the coordinator asks
// logprobs of a completions prefill leg only with echo); nil otherwise.
func readEcho(choice *jsonbody.Object) *EchoPrompt {
	lp, ok := memberObject(choice, bodykeys.Logprobs)
	if !ok {
		return nil
	}
	raw, _ := choice.Get(keyText)
	text, ok := jsonbody.String(raw)
	if !ok {
		return nil
	}
	e := &EchoPrompt{Text: text, textShift: int64(utf8.RuneCountInString(text))}
	arrays := readLogprobArrays(lp)
	if arrays == nil {
		return e
	}
	e.logprobs = arrays
	e.tokenShift = nextOffset(arrays)
	return e
}

// readLogprobArrays reads the four arrays of a CompletionLogProbs (a
// missing one is empty); nil when one is not an array.
func readLogprobArrays(lp *jsonbody.Object) *echoLogprobs {
	var a echoLogprobs
	for _, f := range []struct {
		key string
		dst *[]byte
	}{{keyTextOffset, &a.textOffset}, {keyTokenLogprobs, &a.tokenLogprobs}, {keyTokensList, &a.tokens}, {keyTopLogprobs, &a.topLogprobs}} {
		raw, ok := lp.Get(f.key)
		switch {
		case !ok || jsonbody.IsNull(raw):
			raw = []byte("[]")
		case raw[0] != '[':
			return nil
		}
		*f.dst = bytes.Clone(raw)
	}
	return &a
}

// nextOffset is the offset after the last token: its text_offset plus its
// length, as vLLM computes the next one.
func nextOffset(a *echoLogprobs) int64 {
	var last int64
	_ = jsonbody.EachElement(a.textOffset, func(_ int, elem []byte) error {
		last, _ = jsonbody.Int(elem)
		return nil
	})
	var lastToken []byte
	_ = jsonbody.EachElement(a.tokens, func(_ int, elem []byte) error {
		lastToken = elem
		return nil
	})
	if lastToken == nil {
		return 0
	}
	s, _ := jsonbody.String(lastToken)
	return last + int64(utf8.RuneCountInString(s))
}

// prefix puts the prompt before a choice's text and logprobs; the choice's
// text_offset move by the prompt tokens' length. It reports a change.
func (e *EchoPrompt) prefix(choice *jsonbody.Object) bool {
	raw, ok := choice.Get(keyText)
	text, isString := jsonbody.String(raw)
	if !ok || !isString {
		return false
	}
	choice.Set(keyText, jsonbody.AppendString(nil, e.Text+text))
	lp, ok := memberObject(choice, bodykeys.Logprobs)
	if !ok || e.logprobs == nil {
		return true
	}
	gen := readLogprobArrays(lp)
	if gen == nil {
		return true
	}
	lp.Set(keyTextOffset, concatArrays(e.logprobs.textOffset, shiftOffsets(gen.textOffset, e.tokenShift)))
	lp.Set(keyTokenLogprobs, concatArrays(e.logprobs.tokenLogprobs, gen.tokenLogprobs))
	lp.Set(keyTokensList, concatArrays(e.logprobs.tokens, gen.tokens))
	lp.Set(keyTopLogprobs, concatArrays(e.logprobs.topLogprobs, gen.topLogprobs))
	choice.Set(bodykeys.Logprobs, lp.Bytes())
	return true
}

// shift moves a choice's text_offset by n; it reports a change.
func shift(choice *jsonbody.Object, n int64) bool {
	lp, ok := memberObject(choice, bodykeys.Logprobs)
	if !ok || n == 0 {
		return false
	}
	raw, ok := lp.Get(keyTextOffset)
	if !ok || len(raw) == 0 || raw[0] != '[' {
		return false
	}
	lp.Set(keyTextOffset, shiftOffsets(raw, n))
	choice.Set(bodykeys.Logprobs, lp.Bytes())
	return true
}

// shiftOffsets adds n to each integer of a JSON array (other elements are
// kept as they are).
func shiftOffsets(arr []byte, n int64) []byte {
	out := make([]byte, 0, len(arr)+8)
	out = append(out, '[')
	_ = jsonbody.EachElement(arr, func(i int, elem []byte) error {
		if i > 0 {
			out = append(out, ',')
		}
		if v, ok := jsonbody.Int(elem); ok {
			out = appendInt(out, v+n)
		} else {
			out = append(out, elem...)
		}
		return nil
	})
	return append(out, ']')
}

// concatArrays joins two raw JSON arrays.
func concatArrays(a, b []byte) []byte {
	switch {
	case isEmptyArray(a):
		return b
	case isEmptyArray(b):
		return a
	}
	out := make([]byte, 0, len(a)+len(b))
	out = append(out, bytes.TrimRight(a[:len(a)-1], " \t\r\n")...)
	out = append(out, ',')
	return append(out, bytes.TrimLeft(b[1:], " \t\r\n")...)
}

func isEmptyArray(a []byte) bool {
	a = bytes.TrimSpace(a)
	return len(a) >= 2 && len(bytes.TrimSpace(a[1:len(a)-1])) == 0
}

// echoStream merges the echo into a stream: each choice's first event is
// prefixed, its later events' offsets shifted.
type echoStream struct {
	prompt *EchoPrompt
	seen   []int64 // choice indexes already prefixed
}

func newEchoStream(e *EchoPrompt) *echoStream { return &echoStream{prompt: e} }

// rewrite edits an event's choices; it reports a change.
func (s *echoStream) rewrite(obj *jsonbody.Object) bool {
	return editChoices(obj, func(choice *jsonbody.Object) bool {
		index, _ := memberInt(choice, "index")
		for _, i := range s.seen {
			if i == index {
				return shift(choice, s.prompt.textShift)
			}
		}
		s.seen = append(s.seen, index)
		return s.prompt.prefix(choice)
	})
}
