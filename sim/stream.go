package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// writeStream answers with server-sent events, one event per token and
// choice, flushed as it is written:
//
//   - chat: chat.completion.chunk events (the first token's delta carries
//     role "assistant"), then one {"delta":{},"finish_reason":...} event per
//     choice;
//   - completions: text_completion events, then one {"text":"",
//     "finish_reason":...} event per choice;
//   - generate: GenerateStreamResponse events with the new token_ids (and
//     logprobs when asked); the last token's event carries finish_reason.
//
// Then a usage event (choices []) when stream_options.include_usage is set,
// then "data: [DONE]". The stream stops when ctx ends.
func (g *generation) writeStream(ctx context.Context, w http.ResponseWriter) {
	rc := startStream(w)
	_ = rc.Flush()

	head := g.chunkHead()
	buf := make([]byte, 0, 512)
	g.sent = make([]int, g.n)
	if g.echoOnly {
		for c := range g.n {
			buf = g.appendEchoEvent(buf, head, c)
		}
	}
	if !g.streamTokens(ctx, w, rc, func(b []byte, i int) []byte {
		for c := range g.n {
			b = g.appendTokenEvent(b, head, c, i)
		}
		return b
	}) {
		return
	}
	buf = buf[:0]
	if g.format != formatGenerate || g.finish == finishAbort {
		for c := range g.n {
			buf = g.appendFinishEvent(buf, head, c)
		}
	}
	if g.includeUsage {
		buf = g.appendUsageEvent(buf, head)
	}
	buf = append(buf, "data: [DONE]\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return
	}
	_ = rc.Flush()
}

// startStream answers 200 with the headers of an event stream.
func startStream(w http.ResponseWriter) *http.ResponseController {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}

// streamTokens writes the events of each token, appended by appendToken,
// after its delay (TTFT for the first), each token's flushed at once, and
// cuts the answer after the first as g.cut says. It reports whether the
// stream goes on (false: ctx ended, a write failed or the answer was cut).
func (g *generation) streamTokens(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, appendToken func(b []byte, i int) []byte) bool {
	buf := make([]byte, 0, 512)
	return g.produce(ctx, func(i int) bool {
		buf = appendToken(buf[:0], i)
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return false
		}
		return !g.cut.cutAnswer(ctx)
	})
}

// produce generates the tokens one by one, each after its delay (TTFT for
// the first) and its engine's leave (see engine.step), handing each to
// emit (nil: nothing to emit). An aborted generation stops early with
// g.tokens cut to the tokens produced and finish_reason "abort". A token
// of a stopped engine aborts the connection. It reports whether the answer
// goes on (false: ctx ended or emit failed).
func (g *generation) produce(ctx context.Context, emit func(i int) bool) bool {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for i := range g.tokens {
		wait := g.delay
		if i == 0 {
			wait = g.ttft
		}
		if !sleepTimer(ctx, timer, wait) {
			return false
		}
		if g.engine != nil {
			if h := g.engine.beforeStep.Load(); h != nil {
				(*h)(g.flight, i)
			}
			v, err := g.engine.step(ctx, g.flight)
			switch {
			case errors.Is(err, errAborted):
				g.tokens, g.finish = i, finishAbort
				return true
			case errors.Is(err, errEngineStopped):
				panic(http.ErrAbortHandler)
			case err != nil:
				return false
			}
			g.spans = addToken(g.spans, v)
		}
		if emit != nil && !emit(i) {
			return false
		}
	}
	return true
}

// sleepTimer waits d on t or until ctx ends; it reports whether d elapsed.
func sleepTimer(ctx context.Context, t *time.Timer, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// chunkHead is the JSON object start shared by every event, without the
// closing brace: {"id":...,"object":...,"created":...,"model":...} for the
// OpenAI formats, {"request_id":...} for generate.
func (g *generation) chunkHead() []byte {
	b := make([]byte, 0, 128)
	if g.format == formatGenerate {
		b = append(b, `{"request_id":`...)
		return appendJSONString(b, g.id)
	}
	object := "chat.completion.chunk"
	if g.format == formatCompletions {
		object = "text_completion"
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, g.id)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, g.created, 10)
	b = append(b, `,"model":`...)
	return appendJSONString(b, g.model)
}

// appendTokenEvent appends the event for token i of choice c.
func (g *generation) appendTokenEvent(b, head []byte, c, i int) []byte {
	word := g.word(c, i)
	b = append(b, "data: "...)
	b = append(b, head...)
	b = append(b, `,"choices":[{"index":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	switch g.format {
	case formatChat:
		b = append(b, `,"delta":{`...)
		if i == 0 {
			b = append(b, `"role":"assistant",`...)
		}
		b = append(b, `"content":`...)
		b = append(b, word.json...)
		b = append(b, `},"logprobs":null,"finish_reason":null}]}`...)
	case formatCompletions:
		text := word.text
		if g.echo && i == 0 {
			text = g.echoText + text
		}
		b = append(b, `,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":`...)
		b = append(b, g.completionLogprobs(c, i, i+1)...)
		g.sent[c] += utf8.RuneCountInString(text)
		b = append(b, `,"finish_reason":null`...)
		b = g.appendCompletionTokenIDs(b, word.id, i)
		b = append(b, `}]}`...)
	default:
		b = append(b, `,"logprobs":`...)
		if g.logprobs >= 0 {
			lp, _ := json.Marshal(chatLogprobs{Content: []chatLogprob{g.logprob(c, i)}})
			b = append(b, lp...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"finish_reason":`...)
		if i == g.tokens-1 {
			b = appendJSONString(b, g.finish)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"token_ids":[`...)
		b = strconv.AppendUint(b, uint64(word.id), 10)
		b = append(b, ']')
		if i == g.tokens-1 {
			b = g.appendWeightVersions(b)
		}
		b = append(b, `}]}`...)
	}
	return append(b, "\n\n"...)
}

// appendFinishEvent appends the closing event of choice c (OpenAI formats).
func (g *generation) appendFinishEvent(b, head []byte, c int) []byte {
	b = append(b, "data: "...)
	b = append(b, head...)
	b = append(b, `,"choices":[{"index":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	switch g.format {
	case formatChat:
		b = append(b, `,"delta":{}`...)
	case formatCompletions:
		b = append(b, `,"text":""`...)
	}
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = appendJSONString(b, g.finish)
	if g.format == formatGenerate {
		b = append(b, `,"token_ids":[]`...)
		b = g.appendWeightVersions(b)
	}
	return append(b, "}]}\n\n"...)
}

// weightVersions is the weight_versions of the output: [] rather than null
// when it has no token.
func (g *generation) weightVersions() []weightSpan {
	if g.spans == nil {
		return []weightSpan{}
	}
	return g.spans
}

// appendWeightVersions appends the weight_versions of the whole output,
// which vLLM sends on a generate stream's final chunk only.
func (g *generation) appendWeightVersions(b []byte) []byte {
	spans, _ := json.Marshal(g.weightVersions()) // strings and ints only
	b = append(b, `,"weight_versions":`...)
	return append(b, spans...)
}

// appendUsageEvent appends the usage event.
func (g *generation) appendUsageEvent(b, head []byte) []byte {
	u := g.usage()
	b = append(b, "data: "...)
	b = append(b, head...)
	b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	if d := u.PromptTokensDetails; d != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(d.CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, "}}\n\n"...)
}

// appendEchoEvent appends the one event of choice c of an echo without
// generation: the prompt's text and logprobs.
func (g *generation) appendEchoEvent(b, head []byte, c int) []byte {
	b = append(b, "data: "...)
	b = append(b, head...)
	b = append(b, `,"choices":[{"index":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, `,"text":`...)
	b = appendJSONString(b, g.echoText)
	b = append(b, `,"logprobs":`...)
	b = append(b, g.completionLogprobs(c, 0, 0)...)
	g.sent[c] += utf8.RuneCountInString(g.echoText)
	return append(b, `,"finish_reason":null}]}`+"\n\n"...)
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil { // unreachable for a string
		return append(b, `""`...)
	}
	return append(b, q...)
}
