package builtin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Answer side of D21 and D22: the decode answer reaches the client with the
// prefill worker's cached tokens and prompt logprobs.

// jsonText is a decoded value as JSON text.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// prefillWith is a prefill answer with the KV params and extra members.
func prefillWith(members string) string {
	return `{"choices":[{"index":0,"token_ids":[9]}],"kv_transfer_params":` + prefillKV + `,` + members + `}`
}

const promptLP = `[null,{"2":{"logprob":-1.5,"rank":3,"decoded_token":"b"},"7":{"logprob":-0.2,"rank":1,"decoded_token":"x"}}]`

func TestPDWholeAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		format    legs.Format
		useOpenAI bool
		body      string
		prefill   string
		decode    string
		want      string
		usage     pd.Usage
	}{
		{name: "chat: the prefill's cached tokens and prompt logprobs", format: legs.FormatChat, useOpenAI: true,
			body:    `{"model":"m","messages":[],"prompt_logprobs":1}`,
			prefill: prefillWith(`"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":16}},"prompt_logprobs":` + promptLP),
			decode:  `{"id":"d","choices":[{"index":0}],"usage":{"prompt_tokens":40,"total_tokens":44,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":40}},"prompt_logprobs":null}`,
			want:    `{"id":"d","choices":[{"index":0}],"usage":{"prompt_tokens":40,"total_tokens":44,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":16}},"prompt_logprobs":` + promptLP + `}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 40, CachedTokens: 16, CompletionTokens: 4}},
		{name: "chat: a prefill answer without the count drops the decode's", format: legs.FormatChat, useOpenAI: true,
			body:    `{"model":"m","messages":[]}`,
			prefill: pdPrefillAnswer,
			decode:  `{"choices":[],"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":40}}}`,
			want:    `{"choices":[],"usage":{"prompt_tokens":40}}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 40}},
		{name: "chat: other details stay", format: legs.FormatChat, useOpenAI: true,
			body:    `{"model":"m","messages":[]}`,
			prefill: pdPrefillAnswer,
			decode:  `{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":40,"audio_tokens":2}}}`,
			want:    `{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"audio_tokens":2}}}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 40}},
		{name: "chat: a decode without details is untouched", format: legs.FormatChat, useOpenAI: true,
			body:    `{"model":"m","messages":[]}`,
			prefill: prefillWith(`"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":16}}`),
			decode:  `{"usage":{"prompt_tokens":40,"completion_tokens":4}}`,
			want:    `{"usage":{"prompt_tokens":40,"completion_tokens":4}}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 40, CompletionTokens: 4}},
		{name: "chat with a tokens-in prefill: no details there means none cached", format: legs.FormatChat, useOpenAI: false,
			body:    `{"model":"m","messages":[]}`,
			prefill: prefillWith(`"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}`),
			decode:  `{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":40}}}`,
			want:    `{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":0}}}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 40}},
		{name: "generate: a zero count is left out, as vLLM does", format: legs.FormatGenerate, useOpenAI: true,
			body:    `{"model":"m","token_ids":[1,2,3,4,5],"sampling_params":{}}`,
			prefill: prefillWith(`"usage":{"prompt_tokens":5,"prompt_tokens_details":null}`),
			decode:  `{"choices":[],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":5}},"prompt_logprobs":null}`,
			want:    `{"choices":[],"usage":{"prompt_tokens":5},"prompt_logprobs":null}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 5}},
		{name: "generate: hits and prompt logprobs at the top level", format: legs.FormatGenerate, useOpenAI: true,
			body:    `{"model":"m","token_ids":[1,2,3,4,5],"sampling_params":{"prompt_logprobs":1}}`,
			prefill: prefillWith(`"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":4}},"prompt_logprobs":` + promptLP),
			decode:  `{"choices":[],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":5}},"prompt_logprobs":null}`,
			want:    `{"choices":[],"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":4}},"prompt_logprobs":` + promptLP + `}`,
			usage:   pd.Usage{Reported: true, PromptTokens: 5, CachedTokens: 4}},
		{name: "completions: prompt logprobs in every choice", format: legs.FormatCompletions, useOpenAI: true,
			body:    `{"model":"m","prompt":"hi","prompt_logprobs":1,"n":2}`,
			prefill: `{"choices":[{"index":0,"text":"a","logprobs":null,"prompt_logprobs":` + promptLP + `}],"kv_transfer_params":` + prefillKV + `}`,
			decode:  `{"choices":[{"index":0,"text":"x"},{"index":1,"text":"y","prompt_logprobs":null}],"usage":{"prompt_tokens":2}}`,
			want: `{"choices":[{"index":0,"text":"x","prompt_logprobs":` + promptLP + `},{"index":1,"text":"y","prompt_logprobs":` + promptLP + `}],` +
				`"usage":{"prompt_tokens":2}}`,
			usage: pd.Usage{Reported: true, PromptTokens: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := pdGateway(t, tt.prefill, "application/json", tt.decode)
			rc := pdContext(tt.format, tt.body, false)
			require.NoError(t, runPD(t, gw, tt.useOpenAI, rc))
			got := rc.Sink.(*steptest.Sink).Body
			assert.JSONEq(t, tt.want, string(got))
			assert.Equal(t, tt.usage, rc.PD.Usage)
		})
	}
}

func TestPDUntouchedAnswerKeepsItsBytes(t *testing.T) {
	t.Parallel()
	decode := `{"choices": [ {"index": 0} ], "usage": {"prompt_tokens": 40}}`
	gw := pdGateway(t, prefillWith(`"usage":{"prompt_tokens_details":{"cached_tokens":16}}`), "application/json", decode)
	rc := pdContext(legs.FormatChat, `{"model":"m","messages":[]}`, false)
	require.NoError(t, runPD(t, gw, true, rc))
	assert.Equal(t, decode, string(rc.Sink.(*steptest.Sink).Body), "nothing to change: not re-encoded")
}

// sse frames events as a worker streams them.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

func TestPDStreamRewritesTheUsageEventOnly(t *testing.T) {
	t.Parallel()
	tokens := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"\"usage\": \"prompt_tokens_details\""}}]}`,
		`{"id":"c" , "choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	usage := `{"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":40}}}`
	gw := pdGateway(t, prefillWith(`"usage":{"prompt_tokens_details":{"cached_tokens":32}}`), "text/event-stream",
		sse(tokens[0], tokens[1], usage, "[DONE]"))
	rc := pdContext(legs.FormatChat, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, true)
	require.NoError(t, runPD(t, gw, true, rc))
	got := rc.Sink.(*steptest.Sink).EventStrings()
	require.Len(t, got, 4)
	assert.Equal(t, tokens, got[:2], "token events go through byte for byte")
	assert.JSONEq(t, `{"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}`, got[2])
	assert.Equal(t, "[DONE]", got[3])
	assert.Equal(t, pd.Usage{Reported: true, PromptTokens: 40, CachedTokens: 32, CompletionTokens: 2}, rc.PD.Usage)
}

func TestDecodeAloneLeavesTheAnswerAndRecordsItsUsage(t *testing.T) {
	t.Parallel()
	decode := `{"choices":[],"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":40}},"prompt_logprobs":[null]}`
	gw := pdGateway(t, pdPrefillAnswer, "application/json", decode)
	rc := pdContext(legs.FormatChat, `{"model":"m","messages":[],"prompt_logprobs":0}`, false)
	require.ErrorIs(t, newDecode(t, gw.URL, nil).Execute(t.Context(), rc), steps.ErrDone)
	assert.Equal(t, decode, string(rc.Sink.(*steptest.Sink).Body))
	assert.Equal(t, pd.Usage{Reported: true, PromptTokens: 40, CachedTokens: 40}, rc.PD.Usage)
	assert.Contains(t, string(gw.Legs()[0].Body), `"prompt_logprobs":0`, "no prefill: the decode worker computes them")
}

func TestPDCompletionsEcho(t *testing.T) {
	t.Parallel()
	// The prefill echoes the prompt "Hi thé" as three tokens.
	prefill := `{"choices":[{"index":0,"text":"Hi thé","logprobs":{"text_offset":[0,2,4],"token_logprobs":[null,-1.5,-0.5],` +
		`"tokens":["Hi"," t","hé"],"top_logprobs":[null,{" t":-1.5},{"hé":-0.5}]},"prompt_logprobs":` + promptLP + `}],` +
		`"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0}},"kv_transfer_params":` + prefillKV + `}`
	body := `{"model":"m","prompt":"Hi thé","echo":true,"logprobs":1,"max_tokens":2}`

	t.Run("whole answer", func(t *testing.T) {
		t.Parallel()
		decode := `{"choices":[{"index":0,"text":" a b","logprobs":{"text_offset":[0,2],"token_logprobs":[-0.1,-0.2],` +
			`"tokens":[" a"," b"],"top_logprobs":[{" a":-0.1},{" b":-0.2}]},"finish_reason":"length"}],` +
			`"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}}`
		gw := pdGateway(t, prefill, "application/json", decode)
		rc := pdContext(legs.FormatCompletions, body, false)
		require.NoError(t, runPD(t, gw, true, rc))
		assert.JSONEq(t, `{"choices":[{"index":0,"text":"Hi thé a b","logprobs":{"text_offset":[0,2,4,6,8],`+
			`"token_logprobs":[null,-1.5,-0.5,-0.1,-0.2],"tokens":["Hi"," t","hé"," a"," b"],`+
			`"top_logprobs":[null,{" t":-1.5},{"hé":-0.5},{" a":-0.1},{" b":-0.2}]},"finish_reason":"length","prompt_logprobs":`+promptLP+`}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}`,
			string(rc.Sink.(*steptest.Sink).Body))
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		events := []string{
			`{"choices":[{"index":0,"text":" a","logprobs":{"text_offset":[0],"token_logprobs":[-0.1],"tokens":[" a"],"top_logprobs":[{" a":-0.1}]}}]}`,
			`{"choices":[{"index":1,"text":" c","logprobs":{"text_offset":[0],"token_logprobs":[-0.3],"tokens":[" c"],"top_logprobs":[{" c":-0.3}]}}]}`,
			`{"choices":[{"index":0,"text":" b","logprobs":{"text_offset":[2],"token_logprobs":[-0.2],"tokens":[" b"],"top_logprobs":[{" b":-0.2}]}}]}`,
			`{"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]}`,
			`[DONE]`,
		}
		gw := pdGateway(t, prefill, "text/event-stream", sse(events...))
		rc := pdContext(legs.FormatCompletions, strings.Replace(body, `"max_tokens":2`, `"max_tokens":2,"n":2,"stream":true`, 1), true)
		require.NoError(t, runPD(t, gw, true, rc))
		got := rc.Sink.(*steptest.Sink).EventStrings()
		require.Len(t, got, 5)
		first := `"text_offset":[0,2,4,6],"token_logprobs":[null,-1.5,-0.5,%s],"tokens":["Hi"," t","hé",%q],"top_logprobs":[null,{" t":-1.5},{"hé":-0.5},{%q:%s}]`
		assert.JSONEq(t, `{"choices":[{"index":0,"text":"Hi thé a","logprobs":{`+fmt.Sprintf(first, "-0.1", " a", " a", "-0.1")+`}}]}`, got[0])
		assert.JSONEq(t, `{"choices":[{"index":1,"text":"Hi thé c","logprobs":{`+fmt.Sprintf(first, "-0.3", " c", " c", "-0.3")+`}}]}`, got[1])
		assert.JSONEq(t, `{"choices":[{"index":0,"text":" b","logprobs":{"text_offset":[8],"token_logprobs":[-0.2],"tokens":[" b"],"top_logprobs":[{" b":-0.2}]}}]}`,
			got[2], "later offsets move by the prompt text's length (6 code points)")
		assert.Equal(t, events[3:], got[3:], "nothing to shift: as sent")
	})
}
