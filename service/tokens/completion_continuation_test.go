package tokens

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// completionBody is a client's completion of a text prompt: a budget of
// 10 (at least 4), its token ids asked, prompt logprobs, its own transfer
// params and a field the coordinator does not own.
const completionBody = `{"model":"m","prompt":"Hi there","max_tokens":10,"min_tokens":4,"return_token_ids":true,` +
	`"prompt_logprobs":1,"kv_transfer_params":{"do_remote_decode":true},"ignore_eos":true}`

// newCompletionContinuation carries body, holding each abort back when
// hold says so, keeping up to maxBytes of output.
func newCompletionContinuation(t *testing.T, body string, hold bool, maxBytes int64) *CompletionContinuation {
	t.Helper()
	doc, err := requestbody.Parse([]byte(body), legs.FormatCompletions)
	require.NoError(t, err)
	return NewCompletionContinuation(doc.Root().Clone(), func() bool { return hold }, maxBytes)
}

// The first run's unary answer: 3 tokens, then the pause's abort.
const completionAborted = `{"id":"cmpl-leg-1","object":"text_completion","created":7,"model":"m","choices":[{"index":0,` +
	`"text":"One \"two\"","logprobs":null,"finish_reason":"abort","prompt_logprobs":[null,{"6":{"logprob":-1}}],` +
	`"prompt_token_ids":[5,6],"token_ids":[1,2,3]}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1}}}`

func TestCompletionContinuationUnary(t *testing.T) {
	t.Parallel()
	c := newCompletionContinuation(t, completionBody, true, 1<<20)
	out, err := c.Answer([]byte(completionAborted))
	require.NoError(t, err)
	assert.Nil(t, out, "the abort is held back")
	require.True(t, c.Aborted())
	assert.Equal(t, 3, c.Generated())

	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","prompt":[5,6,1,2,3],"max_tokens":7,"min_tokens":1,"return_token_ids":true,"ignore_eos":true}`, string(body))
	assert.False(t, c.Aborted())

	last := `{"id":"cmpl-leg-2","object":"text_completion","created":8,"model":"m","choices":[{"index":0,` +
		`"text":" three","logprobs":null,"finish_reason":"length","prompt_logprobs":null,"prompt_token_ids":[5,6,1,2,3],"token_ids":[4]}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
	out, err = c.Answer([]byte(last))
	require.NoError(t, err)
	assert.False(t, c.Aborted())
	assert.JSONEq(t, `{"id":"cmpl-leg-1","object":"text_completion","created":7,"model":"m","choices":[{"index":0,`+
		`"text":"One \"two\" three","logprobs":null,"finish_reason":"length","prompt_logprobs":[null,{"6":{"logprob":-1}}],`+
		`"prompt_token_ids":[5,6],"token_ids":[1,2,3,4]}],"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":1}}}`, string(out))
}

func TestCompletionContinuationMaxTokensDefault(t *testing.T) {
	t.Parallel()
	c := newCompletionContinuation(t, `{"model":"m","prompt":[5,6],"return_token_ids":true}`, true, 1<<20)
	out, err := c.Answer([]byte(completionAborted))
	require.NoError(t, err)
	require.Nil(t, out)
	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","prompt":[5,6,1,2,3],"return_token_ids":true,"max_tokens":13}`, string(body), "vLLM's 16 less the output")
}

func TestCompletionContinuationRelaysWhatItDoesNotContinue(t *testing.T) {
	t.Parallel()
	noPrompt := `{"id":"x","choices":[{"index":0,"text":"a","finish_reason":"abort","token_ids":[1]}]}`
	for name, tc := range map[string]struct {
		hold  bool
		body  string
		limit int64
	}{
		"not aborted":               {true, `{"id":"x","choices":[{"index":0,"text":"a","finish_reason":"length","token_ids":[1]}]}`, 1 << 20},
		"abort in the text":         {true, `{"id":"x","choices":[{"index":0,"text":"\"abort\"","finish_reason":"stop"}]}`, 1 << 20},
		"abort of no pause":         {false, completionAborted, 1 << 20},
		"no prompt_token_ids":       {true, noPrompt, 1 << 20},
		"unreadable":                {true, `{"id":"x","choices":"abort"}`, 1 << 20},
		"two choices":               {true, `{"id":"x","choices":[{"finish_reason":"abort"},{"finish_reason":"abort"}]}`, 1 << 20},
		"past max_answer_size":      {true, completionAborted, 8},
		"the worker's error object": {true, `{"object":"error","message":"abort"}`, 1 << 20},
	} {
		c := newCompletionContinuation(t, completionBody, tc.hold, tc.limit)
		out, err := c.Answer([]byte(tc.body))
		require.NoError(t, err, name)
		assert.Equal(t, tc.body, string(out), "%s: relayed as it came", name)
		assert.False(t, c.Aborted(), name)
	}
}

// completionChunk is a streamed completions event of id with text, extra
// choice members and finish_reason.
func completionChunk(id, text, extra, finish string) string {
	return `{"id":"` + id + `","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":"` + text +
		`","logprobs":null,"finish_reason":` + finish + extra + `}]}`
}

func completionUsage(id string, created, prompt, completion int) string {
	return `{"id":"` + id + `","object":"text_completion","created":` + itoa(created) + `,"model":"m","choices":[],"usage":{"prompt_tokens":` +
		itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `,"total_tokens":` + itoa(prompt+completion) + `}}`
}

func TestCompletionContinuationStream(t *testing.T) {
	t.Parallel()
	c := newCompletionContinuation(t, `{"model":"m","prompt":[5,6],"max_tokens":10,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}`, true, 1<<20)
	send := func(data string) string {
		t.Helper()
		out, err := c.Event([]byte(data))
		require.NoError(t, err)
		return string(out)
	}
	first := []string{completionChunk("a", "One", `,"prompt_token_ids":[5,6],"token_ids":[1]`, "null"), completionChunk("a", " two", `,"token_ids":[2]`, "null")}
	for _, ev := range first {
		assert.Equal(t, ev, send(ev), "a run no pause aborted goes out as it came")
	}
	assert.JSONEq(t, completionChunk("a", "", "", "null"), send(completionChunk("a", "", "", `"abort"`)), "the abort goes out as no end")
	assert.Empty(t, send(completionUsage("a", 7, 2, 2)), "that run's usage is withheld")
	assert.Empty(t, send("[DONE]"), "and its [DONE]")
	require.True(t, c.Aborted())
	assert.Equal(t, 2, c.Generated())

	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","prompt":[5,6,1,2],"max_tokens":8,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}`, string(body))

	next := completionChunk("b", " three", `,"prompt_token_ids":[5,6,1,2],"token_ids":[3]`, "null")
	next = next[:len(`{"id":"b","object":"text_completion","created":`)] + "9" + next[len(`{"id":"b","object":"text_completion","created":7`):]
	assert.JSONEq(t, completionChunk("a", " three", `,"token_ids":[3]`, "null"), send(next), "the first run's id and created, no prompt_token_ids")
	assert.JSONEq(t, completionChunk("a", "", `,"token_ids":[4]`, `"length"`), send(completionChunk("b", "", `,"token_ids":[4]`, `"length"`)))
	assert.JSONEq(t, completionUsage("a", 7, 2, 4), send(completionUsage("b", 9, 4, 2)), "the whole answer's usage")
	assert.Equal(t, "[DONE]", send("[DONE]"))
	assert.Equal(t, 4, c.Generated())
}

func TestCompletionContinuable(t *testing.T) {
	t.Parallel()
	const ids = `"return_token_ids":true`
	for name, tc := range map[string]struct {
		body string
		want bool
	}{
		"token prompt":           {`{"prompt":[1,2],` + ids + `}`, true},
		"text prompt":            {`{"prompt":"hi",` + ids + `}`, true},
		"n 1, best_of 1, echo f": {`{"prompt":[1],"n":1,"best_of":1,"echo":false,"logprobs":null,"suffix":"",` + ids + `}`, true},
		"no return_token_ids":    {`{"prompt":[1,2]}`, false},
		"return_token_ids false": {`{"prompt":[1,2],"return_token_ids":false}`, false},
		"a batch of prompts":     {`{"prompt":[[1],[2]],` + ids + `}`, false},
		"a batch of texts":       {`{"prompt":["a","b"],` + ids + `}`, false},
		"empty token prompt":     {`{"prompt":[],` + ids + `}`, false},
		"n 2":                    {`{"prompt":[1],"n":2,` + ids + `}`, false},
		"best_of 2":              {`{"prompt":[1],"best_of":2,` + ids + `}`, false},
		"budgets as numbers":     {`{"prompt":[1],"max_tokens":60.0,"min_tokens":1,` + ids + `}`, true},
		"max_tokens quoted":      {`{"prompt":[1],"max_tokens":"60",` + ids + `}`, false},
		"min_tokens quoted":      {`{"prompt":[1],"min_tokens":"1",` + ids + `}`, false},
		"echo":                   {`{"prompt":[1],"echo":true,` + ids + `}`, false},
		"suffix":                 {`{"prompt":[1],"suffix":"end",` + ids + `}`, false},
		"logprobs":               {`{"prompt":[1],"logprobs":0,` + ids + `}`, false},
		"structured output":      {`{"prompt":[1],"structured_outputs":{"regex":"a"},` + ids + `}`, false},
	} {
		doc, err := requestbody.Parse([]byte(tc.body), legs.FormatCompletions)
		if err != nil {
			assert.False(t, tc.want, "%s: %v", name, err)
			continue
		}
		assert.Equal(t, tc.want, CompletionContinuable(doc.Root()), name)
	}
}
