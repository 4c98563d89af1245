package pd

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// This file holds the answer side of decisions D21 and D22: what the
// prefill worker's answer leaves for the client's, and the sink that writes
// it into the decode worker's answer as it passes. Only the final JSON
// answer and the events that need it (the usage event; with a completions
// echo, each choice's events) are parsed and edited; every other event goes
// through as the worker sent it.

// Answer keys of D21 and D22.
const (
	keyUsage               = "usage"
	keyPromptTokens        = "prompt_tokens"
	keyCompletionTokens    = "completion_tokens"
	keyPromptTokensDetails = "prompt_tokens_details"
	keyCachedTokens        = "cached_tokens"
	keyChoices             = "choices"
	keyWeightVersions      = "weight_versions"
)

// PrefillAnswer is what the prefill worker's answer leaves for the
// client's answer.
type PrefillAnswer struct {
	// CachedTokens is the prefill worker's prefix-cache hits, its
	// usage.prompt_tokens_details.cached_tokens (0 for a tokens-in answer
	// with a usage and no details: vLLM's /inference/v1/generate leaves a
	// zero count out). HasCachedTokens is false when the answer gave none.
	CachedTokens    int64
	HasCachedTokens bool
	// PromptLogprobs is the answer's prompt_logprobs array as the worker
	// sent it (for a completions answer, its first choice's); nil when it
	// had none.
	PromptLogprobs json.RawMessage
	// Echo is the prompt as a completions echo shows it; nil unless the
	// client asked for echo with logprobs.
	Echo *EchoPrompt
	// WeightVersion is the weight version that sampled the prefill's token
	// (a tokens-in answer's first choice's first weight_versions span);
	// empty when the answer names none (the OpenAI formats).
	WeightVersion string
	// SessionToken is the x-session-token the gateway's EPP wrote on the
	// answer (the prefill pod it chose), empty without one.
	SessionToken string
}

// Usage is the token usage of an answer.
type Usage struct {
	// Reported is true when the answer carried a usage object.
	Reported bool
	// PromptTokens is usage.prompt_tokens.
	PromptTokens int64
	// CachedTokens is usage.prompt_tokens_details.cached_tokens, 0 when
	// absent.
	CachedTokens int64
	// CompletionTokens is usage.completion_tokens.
	CompletionTokens int64
}

// ReadPrefillAnswer reads the answer of the prefill leg named leg, written
// in format f:
// a copy of its kv_transfer_params object (nil when it sent none) and what
// the client's answer takes from it. Parts of the answer the coordinator
// cannot read (a usage that is not an object, say) are left out, never an
// error: the KV is what the prefill leg is for.
func ReadPrefillAnswer(resp *http.Response, leg string, f legs.Format) (json.RawMessage, PrefillAnswer, error) {
	obj, err := legs.ReadAnswer(resp, leg)
	if err != nil || obj == nil {
		return nil, PrefillAnswer{}, err
	}
	var a PrefillAnswer
	a.SessionToken = resp.Header.Get(headers.SessionToken)
	a.CachedTokens, a.HasCachedTokens = answerCachedTokens(obj, f)
	holder := obj // where prompt_logprobs sits: top level, or a completions choice
	if f == legs.FormatCompletions {
		if holder = firstChoice(obj); holder == nil {
			holder = &jsonbody.Object{}
		}
		a.Echo = readEcho(holder)
	}
	if raw, ok := holder.Get(bodykeys.PromptLogprobs); ok && len(raw) > 0 && raw[0] == '[' {
		a.PromptLogprobs = bytes.Clone(raw)
	}
	if f == legs.FormatGenerate {
		a.WeightVersion = firstWeightVersion(obj)
	}
	return legs.ObjectMember(obj, bodykeys.KVTransferParams), a, nil
}

// firstWeightVersion is the version of the first weight_versions span of
// a tokens-in answer's first choice, "" when there is none or it is not a
// string.
func firstWeightVersion(obj *jsonbody.Object) string {
	choice := firstChoice(obj)
	if choice == nil {
		return ""
	}
	raw, ok := choice.Get(keyWeightVersions)
	if !ok || len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	var version string
	_ = jsonbody.EachElement(raw, func(_ int, elem []byte) error {
		if span, err := jsonbody.ParseObject(elem); err == nil {
			if v, ok := span.Get("version"); ok {
				_ = json.Unmarshal(v, &version)
			}
		}
		return errStop
	})
	return version
}

// answerCachedTokens reads the answer's prompt-cache count in format f's
// usage shape: usage.prompt_tokens_details.cached_tokens (OpenAI),
// usage.input_tokens_details.cached_tokens (Responses),
// usage.cache_read_input_tokens (Messages).
func answerCachedTokens(obj *jsonbody.Object, f legs.Format) (int64, bool) {
	sh := shapeOf(f)
	usage, ok := memberObject(obj, keyUsage)
	if !ok {
		return 0, false
	}
	counts, ok := sh.counts(usage)
	if !ok {
		return 0, f == legs.FormatGenerate && !hasValue(usage, sh.details)
	}
	n, ok := memberInt(counts, sh.cached)
	return n, ok && n >= 0
}

// hasValue reports a member present and not null.
func hasValue(obj *jsonbody.Object, key string) bool {
	raw, ok := obj.Get(key)
	return ok && !jsonbody.IsNull(raw)
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// firstChoice parses choices[0] of an answer; nil when there is none.
func firstChoice(obj *jsonbody.Object) *jsonbody.Object {
	raw, ok := obj.Get(keyChoices)
	if !ok || len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var choice *jsonbody.Object
	_ = jsonbody.EachElement(raw, func(_ int, elem []byte) error {
		choice, _ = jsonbody.ParseObject(elem)
		return errStop
	})
	return choice
}

// Request is what the client's answer sink needs of the request.
type Request struct {
	// Format is the client's API; Stream is whether it asked for a stream.
	Format legs.Format
	Stream bool
	// Prefill is what the prefill worker's answer left when the leg took
	// the KV of the prefill that ran (D21 and D22 apply); nil otherwise.
	Prefill *PrefillAnswer
	// Usage receives the answer's usage, when it has one.
	Usage *Usage
}

// AnswerSink is the sink a decode-profile answer goes through to next:
// after a prefill (r.Prefill set) it applies D21 to the usage and merges
// the prefill's prompt logprobs (D22); for every answer it records the
// usage in *r.Usage.
func AnswerSink(next legs.Sink, r Request) legs.Sink {
	s := &clientAnswer{next: next, format: r.Format, prefill: r.Prefill, usage: r.Usage}
	if s.prefill != nil && s.prefill.Echo != nil && r.Stream {
		s.echo = newEchoStream(s.prefill.Echo)
	}
	return s
}

// clientAnswer is AnswerSink's sink.
type clientAnswer struct {
	next    legs.Sink
	format  legs.Format
	prefill *PrefillAnswer // nil: no prefill ran, D21 and D22 do not apply
	usage   *Usage
	echo    *echoStream
	out     [][]byte // the batch handed on, when an event was rewritten
}

// usageKey marks an event that may carry a usage: JSON text holds the
// quoted key only as a key (inside a string its quotes are escaped).
var usageKey = []byte(`"usage"`)

// choicesKey is the member the echo edits.
var choicesKey = []byte(`"choices"`)

// hasKey reports whether JSON text holds quoted, a key in its quotes, as
// bytes.Contains does, at a fraction of the cost on every event: it looks
// for the key and its closing quote, then checks the opening one, where a
// search for the opening quote first stops at every string in the text.
func hasKey(text, quoted []byte) bool {
	rest := quoted[1:]
	for i := 0; ; {
		j := bytes.Index(text[i:], rest)
		if j < 0 {
			return false
		}
		if i += j; i > 0 && text[i-1] == '"' {
			return true
		}
		i++
	}
}

// Header implements legs.Sink: the worker's answer header goes on unchanged.
func (s *clientAnswer) Header(h http.Header) { s.next.Header(h) }

// Response implements legs.Sink.
func (s *clientAnswer) Response(status int, contentType string, body []byte) error {
	if s.prefill == nil && !hasKey(body, usageKey) {
		return s.next.Response(status, contentType, body) // nothing to read or change
	}
	if obj, err := jsonbody.ParseObject(body); err == nil {
		changed := false
		if s.prefill != nil {
			changed = billUsage(obj, *s.prefill, s.format)
			changed = mergePromptLogprobs(obj, *s.prefill, s.format) || changed
		}
		s.record(obj)
		if changed {
			body = obj.Bytes()
		}
	}
	return s.next.Response(status, contentType, body)
}

// Events implements legs.Sink.
func (s *clientAnswer) Events(data [][]byte, names []string) error {
	batch := data
	for i, ev := range data {
		out, ok := s.event(ev)
		if !ok {
			continue
		}
		if &batch[0] == &data[0] { // first rewrite: hand on a copy of the batch
			s.out = append(s.out[:0], data...)
			batch = s.out
		}
		batch[i] = out
	}
	return s.next.Events(batch, names)
}

// event edits one event; ok is false when it goes on as it came.
func (s *clientAnswer) event(ev []byte) ([]byte, bool) {
	needsEcho := s.echo != nil && hasKey(ev, choicesKey)
	if !needsEcho && !hasKey(ev, usageKey) {
		return nil, false
	}
	obj, err := jsonbody.ParseObject(ev)
	if err != nil {
		return nil, false
	}
	changed := false
	if needsEcho {
		changed = s.echo.rewrite(obj)
	}
	if s.prefill != nil {
		changed = billUsage(obj, *s.prefill, s.format) || changed
	}
	s.record(obj)
	if !changed {
		return nil, false
	}
	return obj.Bytes(), true
}

// record keeps the answer's usage, if it has one, as the request's: the
// counts it reports replace those recorded before (a Messages stream
// reports the prompt's in message_start, the output's in message_delta).
func (s *clientAnswer) record(obj *jsonbody.Object) {
	sh := shapeOf(s.format)
	h, _ := sh.holder(obj)
	if h == nil {
		return
	}
	usage, ok := memberObject(h, keyUsage)
	if !ok {
		return
	}
	u := *s.usage
	u.Reported = true
	if n, ok := memberInt(usage, sh.prompt); ok {
		u.PromptTokens = n
	}
	if n, ok := memberInt(usage, sh.completion); ok {
		u.CompletionTokens = n
	}
	if counts, ok := sh.counts(usage); ok {
		if n, ok := memberInt(counts, sh.cached); ok {
			u.CachedTokens = n
		}
	}
	*s.usage = u
}

// billUsage applies D21 to an answer's usage: when it reports
// prompt_tokens_details (the decode worker's count, which takes every token
// whose KV came from the prefill worker as cached), cached_tokens becomes
// the prefill worker's, and goes when the prefill answer gave none (and so
// does prompt_tokens_details when nothing else is left in it). A tokens-in
// answer leaves a zero count out, as vLLM's /inference/v1/generate does.
// prompt_tokens, completion_tokens and total_tokens stay the decode
// worker's. It reports whether it changed obj.
func billUsage(obj *jsonbody.Object, a PrefillAnswer, client legs.Format) bool {
	sh := shapeOf(client)
	h, wrapped := sh.holder(obj)
	if h == nil {
		return false
	}
	usage, ok := memberObject(h, keyUsage)
	if !ok {
		return false
	}
	counts, ok := sh.counts(usage)
	if !ok {
		return false
	}
	_, had := counts.Get(sh.cached)
	switch {
	case a.HasCachedTokens && (a.CachedTokens > 0 || client != legs.FormatGenerate):
		counts.Set(sh.cached, appendInt(nil, a.CachedTokens))
	case had:
		counts.Delete(sh.cached)
	default:
		return false
	}
	if sh.details != "" {
		if counts.Len() == 0 {
			usage.Delete(sh.details)
		} else {
			usage.Set(sh.details, counts.Bytes())
		}
	}
	h.Set(keyUsage, usage.Bytes())
	if wrapped {
		obj.Set(sh.wrapper, h.Bytes())
	}
	return true
}

// mergePromptLogprobs puts the prefill's prompt logprobs where vLLM puts
// them in a whole answer (D22): top level for chat and generate, in every
// choice for completions, with a completions echo also prefixing each
// choice's text and logprobs with the prompt's. It reports whether it
// changed obj.
func mergePromptLogprobs(obj *jsonbody.Object, a PrefillAnswer, client legs.Format) bool {
	if a.PromptLogprobs == nil && a.Echo == nil {
		return false
	}
	if client != legs.FormatCompletions {
		if a.PromptLogprobs == nil {
			return false
		}
		obj.Set(bodykeys.PromptLogprobs, a.PromptLogprobs)
		return true
	}
	return editChoices(obj, func(choice *jsonbody.Object) bool {
		if a.PromptLogprobs != nil {
			choice.Set(bodykeys.PromptLogprobs, a.PromptLogprobs)
		}
		if a.Echo != nil {
			a.Echo.prefix(choice)
		}
		return true
	})
}

// editChoices applies edit to every object in obj's choices array and,
// when an edit reports a change, writes the array back; it reports whether
// it did.
func editChoices(obj *jsonbody.Object, edit func(*jsonbody.Object) bool) bool {
	raw, ok := obj.Get(keyChoices)
	if !ok || len(raw) == 0 || raw[0] != '[' {
		return false
	}
	out := make([]byte, 0, len(raw)+256)
	out = append(out, '[')
	edited := false
	err := jsonbody.EachElement(raw, func(i int, elem []byte) error {
		if i > 0 {
			out = append(out, ',')
		}
		choice, err := jsonbody.ParseObject(elem)
		if err != nil || !edit(choice) { // not an object, or unchanged: keep it as it is
			out = append(out, elem...)
			return nil
		}
		edited = true
		out = choice.AppendTo(out)
		return nil
	})
	if err != nil || !edited {
		return false
	}
	obj.Set(keyChoices, append(out, ']'))
	return true
}

var _ legs.Sink = (*clientAnswer)(nil)
