package tokens

import (
	"errors"
	"slices"
	"strconv"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// GenerateContinuation is Continuation for a REST /inference/v1/generate
// request: the client's vLLM GenerateRequest body, whose decode answer the
// service relays as the worker sent it. It carries the request across the
// aborts of fleet pauses: it keeps the output so far, writes the body that
// continues it (NextBody), and makes the runs' answers read as one, a
// unary answer merged (Answer) and a stream's events adapted as they pass
// (Event). An answer no pause aborted is relayed byte for byte.
//
// Only a request of one choice is continued (GenerateContinuable).
type GenerateContinuation struct {
	// doc is the client's document as the first run got it (the service's
	// copy, which no step edits).
	doc *jsonbody.Object
	// cont is asked when a run ends with an abort: true holds the abort
	// back (the answer goes on in the next run).
	cont func() bool
	// maxOutput bounds the output kept (gateway.max_answer_size, 4 bytes
	// a token); past it the request is no longer continued.
	maxOutput int
	// output is every token of the answer so far; base is where the
	// current run's begin in it.
	output []uint32
	base   int
	// spans are the weight versions of output before base.
	spans []*coordinatorv1.WeightVersionSpan
	// first is what the answer's usage takes of the first run's;
	// requestID is its raw request_id.
	first     firstUsage
	requestID []byte
	// aborted: the current run ended with an abort held back. broken: an
	// answer the continuation cannot follow (unreadable, several choices,
	// past maxOutput): no abort is held back any more.
	aborted, broken bool
	// answer is a unary call's first answer; content its logprob entries
	// and the later runs' (nil: no logprobs).
	answer  []byte
	content [][]byte
	sc      scratch
}

// GenerateContinuable reports whether the generate body root can be
// continued: sampling_params.n absent, null or at most 1.
func GenerateContinuable(root *jsonbody.Object) bool {
	sp := root.Object(bodykeys.SamplingParams)
	if sp == nil {
		raw, ok := root.Get(bodykeys.SamplingParams)
		return !ok || jsonbody.IsNull(raw)
	}
	return atMostOne(sp, bodykeys.N) && budgetsReadable(sp, bodykeys.MaxTokens, "min_tokens")
}

// NewGenerateContinuation starts carrying the request whose document (as
// the first run gets it) is doc, which the caller no longer edits; cont
// decides each abort; maxBytes bounds the output kept.
func NewGenerateContinuation(doc *jsonbody.Object, cont func() bool, maxBytes int64) *GenerateContinuation {
	return &GenerateContinuation{doc: doc, cont: cont, maxOutput: int(min(maxBytes/4, 1<<31))}
}

// Aborted reports whether the last run ended with an abort held back: the
// request is to run again (NextBody) once the fleet resumes.
func (g *GenerateContinuation) Aborted() bool { return g.aborted }

// Generated is how many tokens the answer has so far.
func (g *GenerateContinuation) Generated() int { return len(g.output) }

// NextBody is the body that continues the answer: the client's document
// with the prompt and the output so far as its token_ids,
// sampling_params.max_tokens and min_tokens less the output,
// sampling_params.prompt_logprobs removed (the first run's answer has
// them) and no transfer params (they were the first run's); the rest as
// the client sent it. It starts a new run.
func (g *GenerateContinuation) NextBody() ([]byte, error) {
	raw, _ := g.doc.Get(bodykeys.TokenIDs)
	prompt, err := jsonbody.Uint32s(raw)
	if err != nil {
		return nil, errors.New("continuation: token_ids: " + err.Error())
	}
	body := g.doc.Clone()
	body.Set(bodykeys.TokenIDs, jsonbody.AppendUint32s(nil, append(prompt, g.output...)))
	if sp := body.EditObject(bodykeys.SamplingParams); sp != nil {
		done := int64(len(g.output))
		lessOutput(sp, bodykeys.MaxTokens, done, 1)
		lessOutput(sp, "min_tokens", done, 0)
		sp.Delete(bodykeys.PromptLogprobs)
	}
	requestbody.DropTransferParams(body)
	g.base, g.aborted = len(g.output), false
	return body.Bytes(), nil
}

// lessOutput takes done from the integer member key of sp, to no less
// than floor; a member absent, null or not an integer stays.
func lessOutput(sp *jsonbody.Object, key string, done, floor int64) {
	raw, ok := sp.Get(key)
	if !ok {
		return
	}
	if v, ok := jsonbody.Int(raw); ok {
		sp.Set(key, strconv.AppendInt(nil, max(v-done, floor), 10))
	}
}

// collect adds a run's tokens to the output; past maxOutput the
// continuation stops following the answer.
func (g *GenerateContinuation) collect(ids []uint32) {
	if g.broken {
		return
	}
	if len(g.output)+len(ids) > g.maxOutput {
		g.broken, g.output = true, nil
		return
	}
	g.output = append(g.output, ids...)
}

// holds reports whether a run's choice ended with an abort to hold back,
// asking cont once.
func (g *GenerateContinuation) holds(ch *generateChoice) bool {
	return ch != nil && !g.broken && coordinatorv1.FinishReason(ch.FinishReason) == coordinatorv1.FinishReason_FINISH_REASON_ABORT && g.cont()
}

// runSpans are the weight versions of a run's choice, which cover the
// run's output (nil when it names none or they do not read).
func (g *GenerateContinuation) runSpans(ch *generateChoice) []*coordinatorv1.WeightVersionSpan {
	spans, err := weightVersions(ch.WeightVersions, len(g.output)-g.base)
	if err != nil {
		return nil
	}
	return spans
}

// wholeSpans are the weight versions of the whole output once a
// continuation run's choice names its own, as JSON with absolute starts.
func (g *GenerateContinuation) wholeSpans(ch *generateChoice) []byte {
	return appendSpans(nil, joinSpans(slices.Clone(g.spans), g.runSpans(ch), g.base))
}

// appendSpans appends vLLM's weight_versions of spans:
// [{"version":..,"start":..,"end":..},..].
func appendSpans(b []byte, spans []*coordinatorv1.WeightVersionSpan) []byte {
	b = append(b, '[')
	for i, sp := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"version":`...)
		b = jsonbody.AppendString(b, sp.GetVersion())
		b = append(b, `,"start":`...)
		b = strconv.AppendUint(b, uint64(sp.GetStart()), 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendUint(b, uint64(sp.GetStart())+uint64(sp.GetCount()), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// answerIndex indexes what a continuation edits in an answer or event: the
// choices, their logprobs, the usage.
var answerIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"choices": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{"logprobs": {}}}},
	"usage":   {},
}}

// firstChoice is the first choice of an answer parsed with answerIndex,
// for editing, nil when it has none.
func firstChoice(root *jsonbody.Object) *jsonbody.Object {
	choices := root.EditArray("choices")
	if choices == nil || choices.Len() == 0 {
		return nil
	}
	return choices.EditObject(0)
}

// noteFirst keeps what the whole answer's usage takes of the first run's
// (u, in root).
func (g *GenerateContinuation) noteFirst(u *generateUsage, root *jsonbody.Object) {
	if u != nil {
		g.first.keep(u.PromptTokens, root.Object("usage"))
	}
}

// rewriteUsage makes usage, a continuation run's (u), the whole answer's.
func (g *GenerateContinuation) rewriteUsage(usage *jsonbody.Object, u *generateUsage) {
	if u != nil {
		g.first.rewrite(usage, uint64(g.base)+uint64(u.CompletionTokens))
	}
}
