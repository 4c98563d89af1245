package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Prompt logprobs and completions logprobs, as vLLM writes them. Every
// value is a function of the prompt's token IDs, so a prefill worker and an
// aggregated worker give the same numbers for the same prompt.

// promptSalt separates the prompt-logprob hashes from the others.
const promptSalt = 0x70726f6d7074

// PromptLogprob is the simulated log probability of prompt token i (i ≥ 1)
// given the tokens before it, and its rank among the candidates.
func PromptLogprob(prompt []uint32, i int) (logprob float64, rank int) {
	milli, rank := promptLogprobMilli(prompt, i)
	return float64(milli) / 1000, rank
}

// promptLogprobMilli keeps PromptLogprob in thousandths, so JSON shows
// -1.234 rather than -1.2340000000000002.
func promptLogprobMilli(prompt []uint32, i int) (int64, int) {
	h := promptHash(prompt[:i+1], promptSalt)
	return -1000 - int64(h%3000), 1 + int(h>>32%4)
}

// candidate is one entry of a prompt position's logprobs.
type candidate struct {
	id    uint32
	milli int64
	rank  int
}

// promptCandidates are prompt position i's entries for prompt_logprobs k,
// in vLLM's order: the prompt token first (with its rank), then the k most
// likely tokens by rank without it. Logprobs fall 0.3 per rank.
func promptCandidates(prompt []uint32, i, k int) []candidate {
	milli, rank := promptLogprobMilli(prompt, i)
	out := make([]candidate, 1, k+1)
	out[0] = candidate{id: prompt[i], milli: milli, rank: rank}
	for j := 1; j <= k; j++ {
		if j == rank {
			continue
		}
		id := prompt[i]
		for n := uint64(0); id == prompt[i] || hasCandidate(out, id); n++ {
			id = uint32(promptHash(prompt[:i+1], promptSalt, uint64(j), n) % 100_000)
		}
		out = append(out, candidate{id: id, milli: milli - int64(j-rank)*300, rank: j})
	}
	return out
}

func hasCandidate(l []candidate, id uint32) bool {
	for _, c := range l {
		if c.id == id {
			return true
		}
	}
	return false
}

// appendPromptLogprobs appends vLLM's prompt_logprobs for prompt_logprobs
// k: null for the first token, then {"<id>": {"logprob", "rank",
// "decoded_token"}, ...} per position.
func appendPromptLogprobs(b []byte, prompt []uint32, k int) []byte {
	b = append(b, '[')
	for i := range prompt {
		if i > 0 {
			b = append(b, ',')
		}
		if i == 0 {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		for n, c := range promptCandidates(prompt, i, k) {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = strconv.AppendUint(b, uint64(c.id), 10)
			b = append(b, `":{"logprob":`...)
			b = appendMilli(b, c.milli)
			b = append(b, `,"rank":`...)
			b = strconv.AppendInt(b, int64(c.rank), 10)
			b = append(b, `,"decoded_token":`...)
			b = appendJSONString(b, tokenText(c.id))
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendMilli(b []byte, milli int64) []byte {
	return strconv.AppendFloat(b, float64(milli)/1000, 'f', -1, 64)
}

// tokenText is a token's text as vLLM decodes it alone (invalid UTF-8
// replaced); "" when the tokenizer is unavailable or has no such token.
func tokenText(id uint32) string {
	return decodeText([]uint32{id})
}

// decodeText decodes token IDs with cl100k_base.
func decodeText(ids []uint32) string {
	tok, err := sharedTokenizer()
	if err != nil {
		return ""
	}
	ints := make([]int, len(ids))
	for i, id := range ids {
		ints[i] = int(id)
	}
	return strings.ToValidUTF8(tok.tk.Decode(ints), "\uFFFD")
}

// completionLogprobs is vLLM's CompletionLogProbs, built token by token:
// text_offset counts code points from the first token's offset.
type completionLogprobs struct {
	next          int
	textOffset    []int
	tokenLogprobs []json.RawMessage
	tokens        []string
	topLogprobs   []json.RawMessage
}

func newCompletionLogprobs(offset int) *completionLogprobs {
	return &completionLogprobs{next: offset}
}

// add appends one token: its text, logprob (JSON, null for none) and top
// logprobs (a JSON object, or null).
func (l *completionLogprobs) add(token string, logprob, top json.RawMessage) {
	l.textOffset = append(l.textOffset, l.next)
	l.next += utf8.RuneCountInString(token)
	l.tokenLogprobs = append(l.tokenLogprobs, logprob)
	l.tokens = append(l.tokens, token)
	l.topLogprobs = append(l.topLogprobs, top)
}

// MarshalJSON writes the four arrays.
func (l *completionLogprobs) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TextOffset    []int             `json:"text_offset"`
		TokenLogprobs []json.RawMessage `json:"token_logprobs"`
		Tokens        []string          `json:"tokens"`
		TopLogprobs   []json.RawMessage `json:"top_logprobs"`
	}{nonNil(l.textOffset), nonNil(l.tokenLogprobs), nonNil(l.tokens), nonNil(l.topLogprobs)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// topObject writes {"<text>": logprob, ...} in order; a text seen before
// keeps its place and takes the later value, as a Python dict does.
func topObject(texts []string, logprobs []json.RawMessage) json.RawMessage {
	seen := make(map[string]int, len(texts))
	keys := make([]string, 0, len(texts))
	values := make([]json.RawMessage, 0, len(texts))
	for i, t := range texts {
		if at, ok := seen[t]; ok {
			values[at] = logprobs[i]
			continue
		}
		seen[t] = len(keys)
		keys = append(keys, t)
		values = append(values, logprobs[i])
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendJSONString(nil, k))
		b.WriteByte(':')
		b.Write(values[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// addPrompt appends the prompt's tokens as an echo shows them with
// logprobs k: the first token without a logprob, then each with the first
// k+1 of its prompt candidates (promptK of them computed).
func (l *completionLogprobs) addPrompt(prompt []uint32, k, promptK int) {
	for i, id := range prompt {
		if i == 0 {
			l.add(tokenText(id), json.RawMessage("null"), json.RawMessage("null"))
			continue
		}
		cands := promptCandidates(prompt, i, promptK)
		cands = cands[:min(len(cands), k+1)]
		texts := make([]string, len(cands))
		lps := make([]json.RawMessage, len(cands))
		for n, c := range cands {
			texts[n], lps[n] = tokenText(c.id), appendMilli(nil, c.milli)
		}
		l.add(tokenText(id), appendMilli(nil, cands[0].milli), topObject(texts, lps))
	}
}

// addGenerated appends token i of choice c with logprobs k (the generated
// token first, max(k, 1) entries).
func (g *generation) addGenerated(l *completionLogprobs, c, i int) {
	w := g.word(c, i)
	top := topLogprobs(g.prompt, c, i, max(g.logprobs, 1), w.id)
	texts := make([]string, len(top))
	lps := make([]json.RawMessage, len(top))
	for n, t := range top {
		texts[n] = tokenText(t.TokenID)
		if n == 0 {
			texts[n] = w.text
		}
		lps[n] = strconv.AppendFloat(nil, float64(t.Logprob), 'g', -1, 32)
	}
	l.add(w.text, lps[0], topObject(texts, lps))
}

// promptLogprobs is the prompt_logprobs a request asks for: the top-level
// one (chat, completions; a completions echo with logprobs defaults it to
// logprobs, as vLLM does) or sampling_params' (generate); -1 for none.
func (req *workerRequest) promptLogprobs() int64 {
	var p *int64
	switch req.format {
	case formatGenerate:
		if req.SamplingParams != nil {
			p = req.SamplingParams.PromptLogprobs
		}
	default:
		p = req.PromptLogprobs
	}
	switch {
	case p != nil:
		return *p
	case req.format == formatCompletions && req.Echo:
		return req.logprobs()
	}
	return -1
}

// echoText is the prompt as a completions echo shows it: the text as sent,
// or the token IDs decoded.
func (req *workerRequest) echoText() string {
	if req.promptIDs != nil {
		return decodeText(req.promptIDs)
	}
	var text string
	_ = json.Unmarshal(req.promptText, &text)
	return text
}

// echoOnly is vLLM's "echo without generation": a completions echo with
// max_tokens 0 answers the prompt alone.
func (req *workerRequest) echoOnly() bool {
	m := req.maxTokens()
	return req.format == formatCompletions && req.Echo && m != nil && *m == 0
}

// checkPromptLogprobs validates prompt_logprobs as vLLM does (a chat or
// completions stream cannot carry them), within what the simulator
// computes.
func (req *workerRequest) checkPromptLogprobs() *apiError {
	explicit := req.PromptLogprobs
	if req.format == formatGenerate {
		explicit = nil
		if req.SamplingParams != nil {
			explicit = req.SamplingParams.PromptLogprobs
		}
	}
	if explicit != nil {
		switch v := *explicit; {
		case req.format != formatGenerate && req.stream() && v != 0:
			return badRequest("`prompt_logprobs` are not available when `stream=True`.")
		case v < -1:
			return badRequest("`prompt_logprobs` must be a positive value or -1.")
		case v == -1:
			return badRequest("sim: prompt_logprobs -1 (the whole vocabulary) is not simulated")
		}
	}
	p := req.promptLogprobs()
	if p > maxLogprobs {
		return badRequest("prompt_logprobs must be at most %d, got %d", maxLogprobs, p)
	}
	if p >= 0 && req.promptIDs == nil {
		return badRequest("sim: prompt_logprobs need a token-ID prompt (the simulator does not tokenize on workers)")
	}
	return nil
}

// remotePrefill reports a decode request that takes its KV from a prefill
// worker: kv_transfer_params with do_remote_prefill true.
func (req *workerRequest) remotePrefill() bool {
	kv, ok := kvObject(req.kvParams())
	return ok && bytes.Equal(kv["do_remote_prefill"], []byte("true"))
}

// errNoPromptLogits is vLLM's decoder asked for the prompt's logprobs after
// a remote prefill: it has the prompt's KV, not its logits.
var errNoPromptLogits = &apiError{
	status:  http.StatusInternalServerError,
	message: "sim: a decode worker after a remote prefill has no prompt logits (prompt_logprobs, or echo with logprobs)",
}
