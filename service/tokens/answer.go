package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// This file reads the decode worker's answers to a tokens request, vLLM's
// GenerateResponse and GenerateStreamResponse (compat §9.2), into the typed
// output:
//
//	{"choices": [{"index": 0, "token_ids": [..], "finish_reason": "length" | null,
//	              "logprobs": null | {"content": [{"token": "token_id:<id>", "logprob": -0.1,
//	                                               "top_logprobs": [{"token": "token_id:<id>", "logprob": ..}, ..]}, ..]},
//	              "weight_versions": null | [{"version": "v1", "start": 0, "end": ..}, ..]}],
//	 "usage": {"prompt_tokens": .., "completion_tokens": .., "total_tokens": ..,
//	           "prompt_tokens_details": null | {"cached_tokens": ..}},
//	 "prompt_logprobs": null | [null, {"<id>": {"logprob": .., "rank": .., "decoded_token": ..}, ..}, ..]}
//
// A small typed struct holds it. fastAnswer (fastanswer.go) reads the
// usual shapes into it in one pass, four to five times faster than
// encoding/json (BenchmarkStreamEvent), and leaves any other to
// encoding/json, which reads it as before: encoding/json took about half
// the time of walking the event with internal/jsonbody, whose every nested
// parse validates its subtree again. Members it does not name
// (routed_experts, kv_transfer_params, ...) are skipped; token spellings
// and finish reasons are read without allocating.
//
// Errors are plain (the client gets Internal with the request id; the log
// has the detail), except a worker's error object, which is an
// *gateway.StatusError of the decode leg.

// generateAnswer is what the conversion reads of a GenerateResponse or a
// GenerateStreamResponse event, and of an error object in their place.
type generateAnswer struct {
	Choices        []generateChoice `json:"choices"`
	Usage          *generateUsage   `json:"usage"`
	PromptLogprobs json.RawMessage  `json:"prompt_logprobs"`
	// Error is {"error": {...}}; Object and Code are vLLM's older
	// {"object": "error", "code": ..}.
	Error  json.RawMessage `json:"error"`
	Object errorKind       `json:"object"`
	Code   json.RawMessage `json:"code"`
}

type generateChoice struct {
	Index          uint32        `json:"index"`
	TokenIDs       []uint32      `json:"token_ids"`
	FinishReason   finishReason  `json:"finish_reason"`
	Logprobs       *chatLogprobs `json:"logprobs"`
	WeightVersions []weightSpan  `json:"weight_versions"` // versions.go
}

// chatLogprobs is vLLM's ChatCompletionLogProbs.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Token       tokenSpelling `json:"token"`
	Logprob     float32       `json:"logprob"`
	TopLogprobs []topLogprob  `json:"top_logprobs"`
}

type topLogprob struct {
	Token   tokenSpelling `json:"token"`
	Logprob float32       `json:"logprob"`
}

type generateUsage struct {
	PromptTokens        uint32 `json:"prompt_tokens"`
	CompletionTokens    uint32 `json:"completion_tokens"`
	TotalTokens         uint32 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *uint32 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// tokenSpelling is a token of a tokens-in answer, the JSON string
// "token_id:<id>".
type tokenSpelling uint32

func (t *tokenSpelling) UnmarshalJSON(raw []byte) error {
	id, err := tokenID(raw)
	*t = tokenSpelling(id)
	return err
}

// finishReason is vLLM's finish_reason; null leaves it unspecified, and so
// does a reason this API does not name.
type finishReason coordinatorv1.FinishReason

func (f *finishReason) UnmarshalJSON(raw []byte) error {
	switch string(raw) {
	case "null":
		return nil
	case `"stop"`:
		*f = finishReason(coordinatorv1.FinishReason_FINISH_REASON_STOP)
	case `"length"`:
		*f = finishReason(coordinatorv1.FinishReason_FINISH_REASON_LENGTH)
	case `"abort"`:
		*f = finishReason(coordinatorv1.FinishReason_FINISH_REASON_ABORT)
	default:
		if raw[0] != '"' {
			return errors.New("finish_reason: not a string")
		}
	}
	return nil
}

// errorKind records whether "object" is "error".
type errorKind bool

func (e *errorKind) UnmarshalJSON(raw []byte) error {
	*e = string(raw) == `"error"`
	return nil
}

// readAnswer decodes one answer or event into sc's answer, overwriting
// what the previous read returned; a worker's error object becomes the
// decode leg's *gateway.StatusError.
// The usual shapes are read by fastAnswer (fastanswer.go), any other by
// encoding/json.
func readAnswer(data []byte, what string, sc *scratch) (*generateAnswer, error) {
	a := sc.newAnswer()
	if !fastAnswer(data, a, sc) {
		*a = generateAnswer{}
		if err := json.Unmarshal(data, a); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if (len(a.Error) > 0 && !jsonbody.IsNull(a.Error)) || bool(a.Object) {
		return nil, workerError(a, data)
	}
	return a, nil
}

// parseTokensResponse reads a whole GenerateResponse. prompt is the
// request's token IDs, which prompt_logprobs entries are about; with none,
// prompt_logprobs is not read.
func parseTokensResponse(body []byte, prompt []uint32) (*coordinatorv1.TokensResponse, error) {
	sc := &scratch{}
	a, err := readAnswer(body, "decode answer", sc)
	if err != nil {
		return nil, err
	}
	if a.Choices == nil {
		return nil, errors.New("decode answer: no choices")
	}
	resp := &coordinatorv1.TokensResponse{Choices: make([]*coordinatorv1.TokensChoice, len(a.Choices))}
	for i := range a.Choices {
		c := &coordinatorv1.TokensChoice{Index: a.Choices[i].Index}
		if err := mergeChoice(c, &a.Choices[i], sc, len(a.Choices[i].TokenIDs)); err != nil {
			return nil, fmt.Errorf("decode answer: choices[%d]%w", i, err)
		}
		resp.Choices[i] = c
	}
	resp.Usage = a.Usage.proto()
	if prompt != nil && len(a.PromptLogprobs) > 0 && !jsonbody.IsNull(a.PromptLogprobs) {
		if resp.PromptLogprobs, err = parsePromptLogprobs(a.PromptLogprobs, prompt); err != nil {
			return nil, fmt.Errorf("decode answer: prompt_logprobs%w", err)
		}
	}
	return resp, nil
}

// mergeStreamEvent merges the choices of one GenerateStreamResponse event
// into chunk: a choice already in chunk (same index) gets the new tokens
// appended; newChoice hands out an empty choice to add. The event is
// decoded into sc, and the logprob entries added come from it; outputs
// counts each choice's tokens over the stream, which its weight versions
// cover. The event's usage, if any, becomes the chunk's.
func mergeStreamEvent(chunk *coordinatorv1.TokensChunk, data []byte, newChoice func() *coordinatorv1.TokensChoice,
	sc *scratch, outputs outputCounts,
) error {
	a, err := readAnswer(data, "decode event", sc)
	if err != nil {
		return err
	}
	for i := range a.Choices {
		src := &a.Choices[i]
		var c *coordinatorv1.TokensChoice
		for j := len(chunk.Choices) - 1; j >= 0; j-- {
			if chunk.Choices[j].Index == src.Index {
				c = chunk.Choices[j]
				break
			}
		}
		if c == nil {
			c = newChoice()
			c.Index = src.Index
			chunk.Choices = append(chunk.Choices, c)
		}
		if err := mergeChoice(c, src, sc, outputs.add(src.Index, len(src.TokenIDs))); err != nil {
			return fmt.Errorf("decode event: choices[%d]%w", i, err)
		}
	}
	if a.Usage != nil {
		chunk.Usage = a.Usage.proto()
	}
	return nil
}

// mergeChoice appends the choice's token IDs (copied: src is sc's) and
// their logprobs (entries sc hands out) to c, and sets its finish reason
// and weight versions when the worker sent them; output is the number of
// tokens of the choice so far, src's included.
func mergeChoice(c *coordinatorv1.TokensChoice, src *generateChoice, sc *scratch, output int) error {
	c.TokenIds = append(c.TokenIds, src.TokenIDs...)
	if src.Logprobs != nil && src.Logprobs.Content != nil {
		content := src.Logprobs.Content
		if len(content) != len(src.TokenIDs) {
			return fmt.Errorf(".logprobs.content: %d entries for %d tokens", len(content), len(src.TokenIDs))
		}
		tops := 0
		for i := range content {
			tops += len(content[i].TopLogprobs)
		}
		entries := sc.entries.take(len(content))
		topEntries, topPtrs := sc.topEntries.take(tops), sc.topPtrs.take(tops)
		for i := range content {
			e := &entries[i]
			*e = coordinatorv1.TokenLogprob{TokenId: uint32(content[i].Token), Logprob: content[i].Logprob}
			if n := len(content[i].TopLogprobs); n > 0 {
				e.TopLogprobs, topPtrs = topPtrs[:n:n], topPtrs[n:]
				for k, t := range content[i].TopLogprobs {
					topEntries[k] = coordinatorv1.TopLogprob{TokenId: uint32(t.Token), Logprob: t.Logprob}
					e.TopLogprobs[k] = &topEntries[k]
				}
				topEntries = topEntries[n:]
			}
			c.Logprobs = append(c.Logprobs, e)
		}
	}
	if src.FinishReason != 0 {
		c.FinishReason = coordinatorv1.FinishReason(src.FinishReason)
	}
	if src.WeightVersions != nil { // they cover the whole output: the last wins
		spans, err := weightVersions(src.WeightVersions, output)
		if err != nil {
			return err
		}
		c.WeightVersions = spans
	}
	return nil
}

func (u *generateUsage) proto() *coordinatorv1.Usage {
	if u == nil {
		return nil
	}
	out := &coordinatorv1.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// tokenID reads vLLM's spelling of a token of a tokens-in request, the
// JSON string "token_id:<id>".
func tokenID(raw []byte) (uint32, error) {
	const prefix = `"token_id:`
	if len(raw) > len(prefix)+1 && bytes.HasPrefix(raw, []byte(prefix)) && raw[len(raw)-1] == '"' {
		if id, ok := parseUint32(raw[len(prefix) : len(raw)-1]); ok {
			return id, nil
		}
	}
	s, ok := jsonbody.String(raw) // an escaped spelling: rare
	if !ok {
		return 0, errNotTokenID
	}
	digits, ok := bytes.CutPrefix([]byte(s), []byte("token_id:"))
	if !ok {
		return 0, errNotTokenID
	}
	id, ok := parseUint32(digits)
	if !ok {
		return 0, errNotTokenID
	}
	return id, nil
}

// errNotTokenID is a logprobs token not spelled "token_id:<id>".
var errNotTokenID = errors.New(`token: not "token_id:<id>"`)

// parseUint32 reads decimal digits (no sign, no leading zeros beyond "0").
func parseUint32(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 10 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 1<<32-1 {
		return 0, false
	}
	return uint32(v), true
}

// parsePromptLogprobs reads vLLM's prompt_logprobs (once per answer, so
// with internal/jsonbody, which keeps each object's member order): one entry
// per prompt token, null for the first, else an object from token ID (a
// decimal key) to {"logprob": ..}, holding the prompt token and its top
// alternatives.
func parsePromptLogprobs(raw []byte, prompt []uint32) ([]*coordinatorv1.PromptLogprob, error) {
	elems, err := jsonbody.ParseArray(raw)
	if err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	if len(elems) != len(prompt) {
		return nil, fmt.Errorf(": %d entries for %d prompt tokens", len(elems), len(prompt))
	}
	out := make([]*coordinatorv1.PromptLogprob, len(elems))
	for i, e := range elems {
		p := &coordinatorv1.PromptLogprob{TokenId: prompt[i]}
		out[i] = p
		if jsonbody.IsNull(e) {
			continue
		}
		byToken, err := jsonbody.ParseObject(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		keys := byToken.Keys()
		p.TopLogprobs = make([]*coordinatorv1.TopLogprob, 0, len(keys))
		for _, k := range keys {
			id, ok := parseUint32([]byte(k))
			if !ok {
				return nil, fmt.Errorf("[%d]: key %q is not a token ID", i, k)
			}
			v, _ := byToken.Get(k)
			var entry struct {
				Logprob *float64 `json:"logprob"`
			}
			if err := json.Unmarshal(v, &entry); err != nil || entry.Logprob == nil {
				return nil, fmt.Errorf("[%d][%q]: no logprob", i, k)
			}
			lp := float32(*entry.Logprob)
			if id == p.TokenId && p.Logprob == nil {
				p.Logprob = &lp
			}
			p.TopLogprobs = append(p.TopLogprobs, &coordinatorv1.TopLogprob{TokenId: id, Logprob: lp})
		}
	}
	return out, nil
}

// workerError is the decode leg's failure for an error object the worker
// sent with a 2xx status (a stream that failed after it started): the
// object's code when it is an HTTP error status, else 500; the client gets
// the worker's object.
func workerError(a *generateAnswer, data []byte) error {
	code := http.StatusInternalServerError
	raw := a.Code
	if len(a.Error) > 0 && a.Error[0] == '{' {
		var inner struct {
			Code json.RawMessage `json:"code"`
		}
		_ = json.Unmarshal(a.Error, &inner)
		raw = inner.Code
	}
	if v, err := strconv.Atoi(string(raw)); err == nil && v >= 400 && v <= 599 {
		code = v
	}
	return &gateway.StatusError{
		Leg:         gateway.ProfileDecode,
		StatusCode:  code,
		ContentType: "application/json",
		Body:        bytes.Clone(data),
		Relay:       true,
	}
}
