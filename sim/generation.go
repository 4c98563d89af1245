package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// generation is one answer a prefill or decode worker produces.
type generation struct {
	format  format
	id      string // response id, or request_id for generate
	model   string
	created int64
	tokens  int // per choice
	n       int
	finish  string
	// prompt is the request's token IDs; seed and done are the earlier
	// prompt and the output it continues (continuationOf), which seed the
	// generate token IDs and logprobs (seed is prompt and done 0 otherwise);
	// a chat continuing its final message goes on from token done
	// (chatDone), and so does a completions prompt ending with the output
	// (completionDone).
	prompt       []uint32
	seed         []uint32
	done         int
	promptTokens int
	stream       bool
	includeUsage bool
	logprobs     int // top-k of generate or completions logprobs, -1 for none
	// cached is the prompt's prefix-cache hits; details reports them in
	// usage.prompt_tokens_details (--enable-prompt-tokens-details).
	cached  int
	details bool
	// promptLogprobs is the prompt_logprobs asked for, -1 for none.
	promptLogprobs int
	// echo is a completions echo: the prompt's text (echoText) and, with
	// logprobs, its logprobs come before the generated ones. echoOnly is
	// an echo with max_tokens 0: the prompt alone.
	echo, echoOnly bool
	echoText       string
	echoK          int // the prompt_logprobs behind an echo's logprobs
	// returnTokenIDs: a completions answer names its token IDs
	// (continue_completion.go).
	returnTokenIDs bool
	// sent counts, per choice, the code points a stream has sent.
	sent []int
	// kv is the prefill's kv_transfer_params answer (nil on decode).
	kv json.RawMessage
	// cut is the fault that cuts the answer after its first part, if any.
	cut   fault
	ttft  time.Duration
	delay time.Duration
	// engine runs the generation as flight; spans are the weight
	// versions of the tokens produced so far.
	engine *engine
	flight *flight
	spans  []weightSpan
}

func (s *Sim) newGeneration(call legCall, req *workerRequest, model string) *generation {
	g := &generation{
		format:       req.format,
		model:        model,
		created:      s.opts.Now().Unix(),
		tokens:       s.opts.OutputTokens,
		n:            int(req.choices()),
		finish:       "stop",
		prompt:       req.promptIDs,
		promptTokens: req.promptTokens(),
		stream:       req.stream(),
		logprobs:     int(req.logprobs()),
		details:      s.opts.PromptTokensDetails,
		cut:          call.fault,
		delay:        s.opts.TokenDelay,
	}
	if !g.stream {
		g.promptLogprobs = int(req.promptLogprobs())
	} else {
		g.promptLogprobs = -1 // no stream carries them
	}
	if m := req.maxTokens(); m != nil {
		g.tokens = int(*m)
		g.finish = "length"
	}
	if req.format == formatCompletions && req.Echo {
		g.echo, g.echoOnly, g.echoText, g.echoK = true, req.echoOnly(), req.echoText(), int(req.promptLogprobs())
	}
	if call.role == roleDecode {
		g.ttft = s.opts.TTFT
	}
	if g.stream && !isNull(req.StreamOptions) {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		_ = json.Unmarshal(req.StreamOptions, &so)
		g.includeUsage = so.IncludeUsage
	}
	g.seed = g.prompt
	switch req.format {
	case formatGenerate:
		g.seed, g.done = continuationOf(g.prompt)
	case formatChat:
		g.done = req.chatDone() // continue_chat.go
	case formatCompletions:
		g.done = req.completionDone() // continue_completion.go
		g.returnTokenIDs = req.ReturnTokenIDs
	}
	g.id = s.responseID(req, call.requestID)
	return g
}

// responseID follows vLLM: chatcmpl-<id> and cmpl-<id> from the request id
// header; generate echoes the body's request_id.
func (s *Sim) responseID(req *workerRequest, headerID string) string {
	base := headerID
	if base == "" {
		base = req.RequestID
	}
	if base == "" {
		base = s.fallbackID()
	}
	switch req.format {
	case formatChat:
		return "chatcmpl-" + base
	case formatCompletions:
		return "cmpl-" + base
	case formatResponses:
		return "resp_" + base
	case formatMessages:
		return "msg_" + base
	}
	if req.RequestID != "" {
		return req.RequestID
	}
	return base
}

// word is the token at position i of choice c.
func (g *generation) word(c, i int) sentenceToken {
	if g.format == formatGenerate {
		return wordAt(completionStart(g.seed, c) + g.done + i)
	}
	return wordAt(g.done + i)
}

// write answers as JSON or SSE, honouring the delays and ctx.
func (g *generation) write(ctx context.Context, w http.ResponseWriter) {
	if g.stream && (g.format == formatResponses || g.format == formatMessages) {
		g.writeNamedStream(ctx, w)
		return
	}
	if g.stream {
		g.writeStream(ctx, w)
		return
	}
	if !g.produce(ctx, nil) {
		return
	}
	body, err := json.Marshal(g.response())
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, message: "sim: encode response: " + err.Error()})
		return
	}
	writeRaw(ctx, w, "application/json", body, g.cut)
}

// writeRaw answers 200 with body; when cut cuts answers (reset-mid-stream,
// hang-mid-stream) it sends half of it, then aborts the connection or sends
// nothing more until ctx ends.
func writeRaw(ctx context.Context, w http.ResponseWriter, contentType string, body []byte, cut fault) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if !cut.cutsAnswer() {
		_, _ = w.Write(body)
		return
	}
	_, _ = w.Write(body[:len(body)/2])
	_ = http.NewResponseController(w).Flush()
	cut.cutAnswer(ctx)
}

type usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func (g *generation) usage() usage {
	c := g.tokens * g.n
	if g.echoOnly {
		c = g.n // vLLM runs one token it does not show
	}
	u := usage{PromptTokens: g.promptTokens, CompletionTokens: c, TotalTokens: g.promptTokens + c}
	// As vLLM: chat and completions report a zero count, tokens-in does not.
	if g.details && (g.format != formatGenerate || g.cached > 0) {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: g.cached}
	}
	return u
}

type chatResponse struct {
	ID               string          `json:"id"`
	Object           string          `json:"object"`
	Created          int64           `json:"created"`
	Model            string          `json:"model"`
	Choices          []chatChoice    `json:"choices"`
	Usage            usage           `json:"usage"`
	PromptLogprobs   json.RawMessage `json:"prompt_logprobs,omitempty"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatMessageOut  `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type chatMessageOut struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completionResponse struct {
	ID               string             `json:"id"`
	Object           string             `json:"object"`
	Created          int64              `json:"created"`
	Model            string             `json:"model"`
	Choices          []completionChoice `json:"choices"`
	Usage            usage              `json:"usage"`
	KVTransferParams json.RawMessage    `json:"kv_transfer_params,omitempty"`
}

type completionChoice struct {
	Index          int             `json:"index"`
	Text           string          `json:"text"`
	Logprobs       json.RawMessage `json:"logprobs"`
	FinishReason   string          `json:"finish_reason"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs,omitempty"`
	// PromptTokenIDs and TokenIDs answer return_token_ids.
	PromptTokenIDs []uint32 `json:"prompt_token_ids,omitempty"`
	TokenIDs       []uint32 `json:"token_ids,omitempty"`
}

// generateResponse is vLLM's GenerateResponse.
type generateResponse struct {
	RequestID        string           `json:"request_id"`
	Choices          []generateChoice `json:"choices"`
	Usage            usage            `json:"usage"`
	PromptLogprobs   json.RawMessage  `json:"prompt_logprobs"`
	KVTransferParams json.RawMessage  `json:"kv_transfer_params"`
	ECTransferParams json.RawMessage  `json:"ec_transfer_params"`
}

type generateChoice struct {
	Index          int           `json:"index"`
	Logprobs       *chatLogprobs `json:"logprobs"`
	FinishReason   *string       `json:"finish_reason"`
	TokenIDs       []uint32      `json:"token_ids"`
	WeightVersions []weightSpan  `json:"weight_versions"`
}

// chatLogprobs is vLLM's ChatCompletionLogProbs, the logprobs shape of a
// GenerateResponse choice. Tokens are spelled "token_id:<id>" as vLLM does
// for tokens-in requests; bytes is null.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func (g *generation) text(c int) string {
	var b strings.Builder
	for i := range g.tokens {
		b.WriteString(g.word(c, i).text)
	}
	return b.String()
}

// response builds the non-streaming body.
func (g *generation) response() any {
	var null = json.RawMessage("null")
	var promptLogprobs json.RawMessage
	if g.promptLogprobs >= 0 {
		promptLogprobs = appendPromptLogprobs(nil, g.prompt, g.promptLogprobs)
	}
	switch g.format {
	case formatChat:
		r := chatResponse{ID: g.id, Object: "chat.completion", Created: g.created, Model: g.model,
			Choices: make([]chatChoice, g.n), Usage: g.usage(), PromptLogprobs: promptLogprobs, KVTransferParams: g.kv}
		for c := range r.Choices {
			r.Choices[c] = chatChoice{Index: c, Message: chatMessageOut{Role: "assistant", Content: g.text(c)},
				Logprobs: null, FinishReason: g.finish}
		}
		return r
	case formatResponses:
		return g.responsesBody()
	case formatMessages:
		return g.messagesBody()
	case formatCompletions:
		r := completionResponse{ID: g.id, Object: "text_completion", Created: g.created, Model: g.model,
			Choices: make([]completionChoice, g.n), Usage: g.usage(), KVTransferParams: g.kv}
		for c := range r.Choices {
			r.Choices[c] = completionChoice{Index: c, Text: g.echoText + g.text(c), Logprobs: g.completionLogprobs(c, 0, g.tokens),
				FinishReason: g.finish, PromptLogprobs: promptLogprobs}
			if g.returnTokenIDs {
				r.Choices[c].PromptTokenIDs, r.Choices[c].TokenIDs = g.prompt, g.completionTokenIDs(c, 0, g.tokens)
			}
		}
		return r
	}
	if promptLogprobs == nil {
		promptLogprobs = null
	}
	r := generateResponse{RequestID: g.id, Choices: make([]generateChoice, g.n), Usage: g.usage(),
		PromptLogprobs: promptLogprobs, KVTransferParams: g.kv, ECTransferParams: null}
	for c := range r.Choices {
		ch := generateChoice{Index: c, FinishReason: &g.finish, TokenIDs: CompletionTokens(g.seed, g.done+g.tokens, c)[g.done:],
			WeightVersions: g.weightVersions()}
		if g.logprobs >= 0 {
			ch.Logprobs = &chatLogprobs{Content: make([]chatLogprob, g.tokens)}
			for i := range ch.Logprobs.Content {
				ch.Logprobs.Content[i] = g.logprob(c, i)
			}
		}
		r.Choices[c] = ch
	}
	return r
}

// logprob is the logprobs entry of token i of choice c.
func (g *generation) logprob(c, i int) chatLogprob {
	top := TopLogprobs(g.seed, c, g.done+i, g.logprobs)
	e := chatLogprob{
		Token:       tokenIDString(g.word(c, i).id),
		Logprob:     TokenLogprob(g.seed, c, g.done+i),
		TopLogprobs: make([]topLogprob, len(top)),
	}
	for k, t := range top {
		e.TopLogprobs[k] = topLogprob{Token: tokenIDString(t.TokenID), Logprob: t.Logprob}
	}
	return e
}

func tokenIDString(id uint32) string {
	return "token_id:" + strconv.FormatUint(uint64(id), 10)
}

// completionLogprobs is the CompletionLogProbs of choice c's tokens
// [from, to), the echoed prompt's first when from is 0; null without
// logprobs. Offsets start at what the choice has sent so far.
func (g *generation) completionLogprobs(c, from, to int) json.RawMessage {
	if g.logprobs < 0 {
		return json.RawMessage("null")
	}
	offset := 0
	if g.sent != nil {
		offset = g.sent[c]
	}
	l := newCompletionLogprobs(offset)
	if g.echo && from == 0 {
		l.addPrompt(g.prompt, g.logprobs, g.echoK)
	}
	for i := from; i < to; i++ {
		g.addGenerated(l, c, i)
	}
	b, _ := json.Marshal(l) // cannot fail: strings and raw JSON built here
	return b
}
