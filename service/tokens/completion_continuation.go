package tokens

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// CompletionContinuation is GenerateContinuation for a completion (the
// client's OpenAI /v1/completions body, whose decode answer the service
// relays as the worker sent it) whose answer names its token IDs
// ("return_token_ids": true: choice 0's prompt_token_ids and token_ids).
// The run that goes on after a pause is the client's document with the
// prompt and the output so far as its "prompt", token IDs (NextBody): the
// model goes on with its own tokens, none tokenized again. The runs'
// answers read as one: a unary answer merged (Answer), a stream's events
// adapted as they pass (Event). An answer no pause aborted is relayed
// byte for byte.
//
// Only a completion of one choice of plain text that names its tokens is
// continued (CompletionContinuable).
type CompletionContinuation struct {
	// doc is the client's document as the first run got it (the service's
	// copy, which no step edits).
	doc  *jsonbody.Object
	cont func() bool
	// maxOutput bounds what is kept of the output (text, prompt and token
	// ids) in bytes (gateway.max_answer_size); past it the request is no
	// longer continued.
	maxOutput int
	kept      int
	// prompt is the first run's prompt_token_ids (nil: not seen yet, no
	// abort is held back); text and ids the output so far.
	prompt []uint32
	text   []byte
	ids    []uint32
	// base is the tokens generated before the current run.
	base int
	// first is what the answer takes of the first run's.
	first firstRun
	// aborted: the current run ended with an abort held back. broken: an
	// answer the continuation cannot follow: no abort is held back any
	// more. next: a continuation run is under way.
	aborted, broken, next bool
	// answer is a unary call's first answer.
	answer []byte
}

// completionAnswer is what a continuation reads of a completions answer
// or stream event (vLLM's CompletionResponse, CompletionStreamResponse).
type completionAnswer struct {
	ID      json.RawMessage       `json:"id"`
	Created json.RawMessage       `json:"created"`
	Choices []completionRunChoice `json:"choices"`
	Usage   *generateUsage        `json:"usage"`
	Error   json.RawMessage       `json:"error"`
	Object  errorKind             `json:"object"`
}

type completionRunChoice struct {
	Text           *string         `json:"text"`
	FinishReason   json.RawMessage `json:"finish_reason"`
	TokenIDs       []uint32        `json:"token_ids"`
	PromptTokenIDs []uint32        `json:"prompt_token_ids"`
}

// completionRefusals are the members of a completions body that make it
// not continuable when set (not null, not false): logprobs (a
// continuation's text_offset would start again), an echo or a suffix
// (text around the output), structured output (its state is not in the
// tokens), the client's own transfer of prompt embeddings.
var completionRefusals = []string{bodykeys.Logprobs, bodykeys.Echo, "suffix", "structured_outputs", "guided_json",
	"guided_regex", "guided_choice", "guided_grammar", "response_format", "prompt_embeds"}

// CompletionContinuable reports whether the completions body root can be
// continued: "return_token_ids": true (the answer names the prompt's and
// the output's token IDs); n and best_of at most 1; one prompt (a string
// or one token-ID array, not a batch); no logprobs, echo, suffix,
// structured output or prompt_embeds.
func CompletionContinuable(root *jsonbody.Object) bool {
	if !isTrue(root, "return_token_ids") {
		return false
	}
	for _, k := range completionRefusals {
		if raw, ok := root.Get(k); ok && !jsonbody.IsNull(raw) && !isFalse(raw) && string(raw) != `""` {
			return false
		}
	}
	if !atMostOne(root, bodykeys.N) || !atMostOne(root, "best_of") || !budgetsReadable(root, bodykeys.MaxTokens, "min_tokens") {
		return false
	}
	raw, _ := root.Get(bodykeys.Prompt)
	if _, ok := jsonbody.String(raw); ok {
		return true
	}
	ids, err := jsonbody.Uint32s(raw)
	return err == nil && len(ids) > 0
}

// NewCompletionContinuation starts carrying the completion whose document
// (as the first run gets it) is doc, which the caller no longer edits;
// cont decides each abort; maxBytes bounds what is kept of the output.
func NewCompletionContinuation(doc *jsonbody.Object, cont func() bool, maxBytes int64) *CompletionContinuation {
	return &CompletionContinuation{doc: doc, cont: cont, maxOutput: int(min(maxBytes, 1<<31))}
}

// Aborted reports whether the last run ended with an abort held back: the
// request is to run again (NextBody) once the fleet resumes.
func (c *CompletionContinuation) Aborted() bool { return c.aborted }

// Generated is how many tokens the answer has so far.
func (c *CompletionContinuation) Generated() int { return len(c.ids) }

// completionMaxTokens is vLLM's max_tokens of a completion that sets none.
const completionMaxTokens = 16

// NextBody is the body that continues the answer: the client's document
// with "prompt" the first run's prompt token IDs and the output's,
// max_tokens (vLLM's 16 when absent) and min_tokens less the output,
// prompt_logprobs removed (the first run's answer has them) and no
// transfer params (they were the first run's); the rest as the client
// sent it. It starts a new run.
func (c *CompletionContinuation) NextBody() ([]byte, error) {
	if c.prompt == nil {
		return nil, errors.New("continuation: the aborted answer did not name its prompt tokens")
	}
	done := int64(len(c.ids))
	body := c.doc.Clone()
	prompt := make([]uint32, 0, len(c.prompt)+len(c.ids))
	body.Set(bodykeys.Prompt, jsonbody.AppendUint32s(nil, append(append(prompt, c.prompt...), c.ids...)))
	if raw, ok := body.Get(bodykeys.MaxTokens); !ok || jsonbody.IsNull(raw) {
		body.Set(bodykeys.MaxTokens, strconv.AppendInt(nil, completionMaxTokens, 10))
	}
	lessOutput(body, bodykeys.MaxTokens, done, 1)
	lessOutput(body, "min_tokens", done, 0)
	body.Delete(bodykeys.PromptLogprobs)
	requestbody.DropTransferParams(body)
	c.base = int(done)
	c.aborted, c.next = false, true
	return body.Bytes(), nil
}

// collect takes in a run's choice: its text and token ids, and on the
// first run its prompt's. Past maxOutput the continuation stops following
// the answer.
func (c *CompletionContinuation) collect(ch *completionRunChoice) {
	if ch == nil || c.broken {
		return
	}
	if ch.Text != nil {
		c.text = append(c.text, *ch.Text...)
		c.kept += len(*ch.Text)
	}
	c.ids = append(c.ids, ch.TokenIDs...)
	c.kept += 4 * len(ch.TokenIDs)
	if !c.next && c.prompt == nil && ch.PromptTokenIDs != nil {
		c.prompt = ch.PromptTokenIDs
		c.kept += 4 * len(ch.PromptTokenIDs)
	}
	if c.kept > c.maxOutput {
		c.broken, c.text, c.ids, c.prompt = true, nil, nil, nil
	}
}

// noteFirst keeps what the whole answer takes of the first run's (a, read
// of data).
func (c *CompletionContinuation) noteFirst(a *completionAnswer, data []byte) {
	if !c.next {
		c.first.note(a.ID, a.Created, a.Usage, data, completionIndex)
	}
}

// rewriteUsage makes usage, a continuation run's (completion tokens n),
// the whole answer's.
func (c *CompletionContinuation) rewriteUsage(usage *jsonbody.Object, n uint32) {
	c.first.usage.rewrite(usage, uint64(c.base)+uint64(n))
}
