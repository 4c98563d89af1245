// Package pd is the wire around the prefill and decode legs: what
// prefill/decode disaggregation changes in a request and its answer
// (compat decisions D21 and D22), and the relay of a decode-profile answer
// to the client. The prefill leg asks for the prompt's logprobs and the
// decode leg does not (request.go); the prefill answer's prefix-cache hits,
// prompt logprobs and completions echo are read (answer.go) and merged into
// the decode worker's answer, its usage billed, as the relay passes it to
// the client, a whole answer or a stream of events (relay.go: the SSE
// relay; answer.go, echo.go); a request's P/D state is State (state.go).
package pd

import (
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// This file holds the request side of decision D22: after P/D the decode
// worker has the prompt's KV but not its logits, so whatever asks for the
// prompt's logprobs goes to the prefill leg and never to the decode leg.
// The answer side (merging them into the client's answer) is answer.go.

// PromptAsk is what a request asks of its prompt's logprobs, as the prefill
// leg must ask it.
type PromptAsk struct {
	// promptLogprobs is the client's prompt_logprobs (generate:
	// sampling_params.prompt_logprobs); nil when absent or null.
	promptLogprobs []byte
	// echo is a completions request with echo true and logprobs set: its
	// answer starts with the prompt's text and logprobs, which only the
	// prefill worker can give.
	echo bool
	// logprobs and tokensAsIDs are the completions logprobs and
	// return_tokens_as_token_ids, read with echo (nil when absent).
	logprobs, tokensAsIDs []byte
}

// ReadPromptAsk reads obj, a client body in format f (stream: it asked for
// a stream), for D22. A chat or completions stream asking for prompt
// logprobs (prompt_logprobs other than 0) is refused as vLLM refuses it
// (legs.ErrInvalidRequest): no stream carries them, and the prefill leg,
// which does not stream, would accept the request. Completions echo with
// logprobs and max_tokens 0 (scoring the prompt alone) is refused too: the
// decode leg without echo would have nothing to generate.
func ReadPromptAsk(obj *jsonbody.Object, f legs.Format, stream bool) (PromptAsk, error) {
	var ask PromptAsk
	holder := obj
	if f == legs.FormatGenerate {
		sp, ok := memberObject(obj, bodykeys.SamplingParams)
		if !ok {
			return ask, nil
		}
		holder = sp
	}
	if raw, ok := holder.Get(bodykeys.PromptLogprobs); ok && !jsonbody.IsNull(raw) {
		ask.promptLogprobs = raw
		if v, isInt := jsonbody.Int(raw); stream && f != legs.FormatGenerate && isInt && v != 0 {
			return ask, legs.Invalidf("prompt_logprobs are not available when stream=True")
		}
	}
	if f != legs.FormatCompletions || !echoWithLogprobs(obj) {
		return ask, nil
	}
	if raw, ok := obj.Get(bodykeys.MaxTokens); ok {
		if v, isInt := jsonbody.Int(raw); isInt && v == 0 {
			return ask, legs.Invalidf("echo with logprobs and max_tokens 0 needs a pipeline without a prefill step: " +
				"after prefill/decode disaggregation only the prefill worker has the prompt's logprobs")
		}
	}
	ask.echo = true
	ask.logprobs, _ = obj.Get(bodykeys.Logprobs)
	if raw, ok := obj.Get(bodykeys.ReturnTokensAsTokenIDs); ok && !jsonbody.IsNull(raw) {
		ask.tokensAsIDs = raw
	}
	return ask, nil
}

// echoWithLogprobs reports a completions body with "echo": true and a
// non-null logprobs: vLLM then computes the prompt's logprobs (its
// prompt_logprobs defaults to logprobs).
func echoWithLogprobs(obj *jsonbody.Object) bool {
	echo, _ := obj.Get(bodykeys.Echo)
	if on, _ := jsonbody.Flag(echo); !on { // as vLLM reads it: "true", 1, "yes"
		return false
	}
	lp, ok := obj.Get(bodykeys.Logprobs)
	return ok && !jsonbody.IsNull(lp)
}

// AppendCompletionsCap ends the fields of a fresh completions prefill leg
// after its kv_transfer_params: one token unstreamed, and what D22 moves
// there. With echo it asks vLLM's "echo without generation" (max_tokens 0:
// the engine still runs one token, so the KV is kept for decode, and the
// answer is exactly the prompt's text and logprobs).
func AppendCompletionsCap(b *jsonbody.Segments, ask PromptAsk, stream bool) {
	if !ask.echo {
		b.WriteString(`,"max_tokens":1,"stream":false`)
		if ask.promptLogprobs != nil && !stream {
			b.WriteString(`,"prompt_logprobs":`)
			b.Write(ask.promptLogprobs)
		}
		return
	}
	b.WriteString(`,"max_tokens":0,"stream":false,"echo":true,"logprobs":`)
	b.Write(ask.logprobs)
	if ask.promptLogprobs != nil {
		b.WriteString(`,"prompt_logprobs":`)
		b.Write(ask.promptLogprobs)
	}
	if ask.tokensAsIDs != nil {
		b.WriteString(`,"return_tokens_as_token_ids":`)
		b.Write(ask.tokensAsIDs)
	}
}

// AppendSamplingAsk adds ,"prompt_logprobs":.. to the sampling_params of a
// fresh generate prefill leg when the client asked for prompt logprobs of a
// non-streamed answer (a stream never carries them).
func AppendSamplingAsk(b *jsonbody.Segments, ask PromptAsk, stream bool) {
	if ask.promptLogprobs == nil || stream {
		return
	}
	b.WriteString(`,"prompt_logprobs":`)
	b.Write(ask.promptLogprobs)
}

// DropPromptLogprobs removes from a decode leg that follows a prefill what
// would ask the decode worker for the prompt's logprobs: prompt_logprobs
// (generate: in sampling_params) and a completions echo with logprobs. A
// generate sampling_params that is not an object is left to the worker.
func DropPromptLogprobs(obj *jsonbody.Object, f legs.Format) {
	if f != legs.FormatGenerate {
		if f == legs.FormatCompletions && echoWithLogprobs(obj) {
			obj.Delete(bodykeys.Echo)
		}
		obj.Delete(bodykeys.PromptLogprobs)
		return
	}
	sp, ok := memberObject(obj, bodykeys.SamplingParams)
	if !ok {
		return
	}
	if _, has := sp.Get(bodykeys.PromptLogprobs); has {
		sp.Delete(bodykeys.PromptLogprobs)
		obj.Set(bodykeys.SamplingParams, sp.Bytes())
	}
}

// memberObject parses obj[key] when it is a JSON object.
func memberObject(obj *jsonbody.Object, key string) (*jsonbody.Object, bool) {
	raw, ok := obj.Get(key)
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	child, err := jsonbody.ParseObject(raw)
	return child, err == nil
}

// memberInt reads obj[key] as an exact integer.
func memberInt(obj *jsonbody.Object, key string) (int64, bool) {
	raw, ok := obj.Get(key)
	if !ok {
		return 0, false
	}
	return jsonbody.Int(raw)
}

// appendInt is strconv.AppendInt in base 10.
func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }
