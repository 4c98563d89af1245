package tokens

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// chatBody is a client's chat: a budget of 10 (at least 4), prompt
// logprobs, its own transfer params and a field the coordinator does not
// own.
const chatBody = `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],` +
	`"max_completion_tokens":10,"min_tokens":4,"prompt_logprobs":1,"kv_transfer_params":{"do_remote_decode":true},"ignore_eos":true}`

// newChatContinuation carries body, holding each abort back when hold
// says so, keeping up to maxBytes of output.
func newChatContinuation(t *testing.T, body string, hold bool, maxBytes int64) *ChatContinuation {
	t.Helper()
	doc, err := requestbody.Parse([]byte(body), legs.FormatChat)
	require.NoError(t, err)
	return NewChatContinuation(doc.Root().Clone(), func() bool { return hold }, maxBytes)
}

// The first run's unary answer: 3 tokens, then the pause's abort.
const chatAborted = `{"id":"chatcmpl-leg-1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,` +
	`"message":{"role":"assistant","content":"One \"two\"","tool_calls":[]},"logprobs":{"content":[{"token":"One","logprob":-1},{"token":" \"","logprob":-2},{"token":"two\"","logprob":-3}]},` +
	`"finish_reason":"abort","token_ids":[1,2,3]}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":8}},` +
	`"prompt_token_ids":[5,6],"prompt_logprobs":[null,{"6":{"logprob":-1}}]}`

func TestChatContinuationUnary(t *testing.T) {
	t.Parallel()
	c := newChatContinuation(t, chatBody, true, 1<<20)
	out, err := c.Answer([]byte(chatAborted))
	require.NoError(t, err)
	assert.Nil(t, out, "the abort is held back")
	require.True(t, c.Aborted())
	assert.Equal(t, 3, c.Generated())

	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},`+
		`{"role":"assistant","content":"One \"two\""}],"max_completion_tokens":7,"min_tokens":1,"ignore_eos":true,`+
		`"continue_final_message":true,"add_generation_prompt":false}`, string(body))
	assert.False(t, c.Aborted())

	last := `{"id":"chatcmpl-leg-2","object":"chat.completion","created":8,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":" three","tool_calls":[]},"logprobs":{"content":[{"token":" three","logprob":-4}]},` +
		`"finish_reason":"length","token_ids":[4]}],"usage":{"prompt_tokens":13,"completion_tokens":1,"total_tokens":14},"prompt_token_ids":[5,6,7,8],"prompt_logprobs":null}`
	out, err = c.Answer([]byte(last))
	require.NoError(t, err)
	assert.False(t, c.Aborted())
	assert.JSONEq(t, `{"id":"chatcmpl-leg-1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"One \"two\" three","tool_calls":[]},"logprobs":{"content":[{"token":"One","logprob":-1},{"token":" \"","logprob":-2},{"token":"two\"","logprob":-3},{"token":" three","logprob":-4}]},`+
		`"finish_reason":"length","token_ids":[1,2,3,4]}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":8}},`+
		`"prompt_token_ids":[5,6],"prompt_logprobs":[null,{"6":{"logprob":-1}}]}`, string(out))
}

func TestChatContinuationRelaysWhatItDoesNotContinue(t *testing.T) {
	t.Parallel()
	done := `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"\"abort\""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	toolCall := `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},"finish_reason":"abort"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	for name, tc := range map[string]struct {
		hold bool
		body string
	}{
		"not aborted":           {true, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"length"}]}`},
		"abort in the text":     {true, done},
		"abort of no pause":     {false, chatAborted},
		"a tool call":           {true, toolCall},
		"unreadable":            {true, `{"id":"x","choices":"abort"}`},
		"past max_answer_size:": {true, chatAborted},
	} {
		limit := int64(1 << 20)
		if name == "past max_answer_size:" {
			limit = 8
		}
		c := newChatContinuation(t, chatBody, tc.hold, limit)
		out, err := c.Answer([]byte(tc.body))
		require.NoError(t, err, name)
		assert.Equal(t, tc.body, string(out), "%s: relayed as it came", name)
		assert.False(t, c.Aborted(), name)
	}
}

// chunk is a streamed chat event of id with delta and finish_reason.
func chunk(id, delta, finish string) string {
	return `{"id":"` + id + `","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":` + delta +
		`,"logprobs":null,"finish_reason":` + finish + `}]}`
}

func usageChunk(id string, prompt, completion int) string {
	return `{"id":"` + id + `","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":` +
		itoa(prompt) + `,"completion_tokens":` + itoa(completion) + `,"total_tokens":` + itoa(prompt+completion) + `}}`
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestChatContinuationStream(t *testing.T) {
	t.Parallel()
	c := newChatContinuation(t, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`, true, 1<<20)
	send := func(data string) string {
		t.Helper()
		out, err := c.Event([]byte(data))
		require.NoError(t, err)
		return string(out)
	}
	first := []string{chunk("a", `{"role":"assistant","content":"One"}`, "null"), chunk("a", `{"content":" two"}`, "null")}
	for _, ev := range first {
		assert.Equal(t, ev, send(ev), "a run no pause aborted goes out as it came")
	}
	assert.JSONEq(t, chunk("a", `{}`, "null"), send(chunk("a", `{}`, `"abort"`)), "the abort goes out as no end")
	assert.Empty(t, send(usageChunk("a", 5, 2)), "that run's usage is withheld")
	assert.Empty(t, send("[DONE]"), "and its [DONE]")
	require.True(t, c.Aborted())
	assert.Equal(t, 2, c.Generated(), "counted by the usage")

	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"One two"}],"max_tokens":8,`+
		`"stream":true,"stream_options":{"include_usage":true},"continue_final_message":true,"add_generation_prompt":false}`, string(body))

	assert.Empty(t, send(`{"id":"b","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},`+
		`"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2]}`), "the continuation's role chunk goes")
	assert.JSONEq(t, chunk("a", `{"content":" three"}`, "null"), send(`{"id":"b","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":" three"},"logprobs":null,"finish_reason":null}]}`))
	assert.JSONEq(t, chunk("a", `{}`, `"length"`), send(chunk("b", `{}`, `"length"`)))
	assert.JSONEq(t, usageChunk("a", 5, 3), send(usageChunk("b", 9, 1)), "the usage is the whole answer's")
	assert.Equal(t, "[DONE]", send("[DONE]"))
	assert.False(t, c.Aborted())
}

func TestChatContinuationStreamCountsByTokenIDs(t *testing.T) {
	t.Parallel()
	c := newChatContinuation(t, `{"model":"m","messages":[],"max_tokens":10,"stream":true,"return_token_ids":true}`, true, 1<<20)
	for _, ev := range []string{
		`{"id":"a","choices":[{"index":0,"delta":{"content":"One two"},"finish_reason":null,"token_ids":[1,2]}]}`,
		`{"id":"a","choices":[{"index":0,"delta":{"content":""},"finish_reason":"abort","token_ids":[]}]}`,
		"[DONE]",
	} {
		_, err := c.Event([]byte(ev))
		require.NoError(t, err)
	}
	require.True(t, c.Aborted())
	assert.Equal(t, 2, c.Generated())
	body, err := c.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","messages":[{"role":"assistant","content":"One two"}],"max_tokens":8,"stream":true,"return_token_ids":true,`+
		`"continue_final_message":true,"add_generation_prompt":false}`, string(body))
}

func TestChatContinuationStreamWithoutItsUsageFails(t *testing.T) {
	t.Parallel()
	c := newChatContinuation(t, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, true, 1<<20)
	for _, ev := range []string{chunk("a", `{"content":"One"}`, `"abort"`), "[DONE]"} {
		_, err := c.Event([]byte(ev))
		require.NoError(t, err)
	}
	require.True(t, c.Aborted())
	_, err := c.NextBody()
	assert.ErrorIs(t, err, errUncounted)
}

func TestChatContinuable(t *testing.T) {
	t.Parallel()
	const msgs = `"model":"m","messages":[{"role":"user","content":"Hi"}]`
	for name, tc := range map[string]struct {
		body   string
		stream bool
		want   bool
	}{
		"unary":                    {`{` + msgs + `}`, false, true},
		"n 1":                      {`{` + msgs + `,"n":1,"tools":null,"response_format":{"type":"text"}}`, false, true},
		"n 2":                      {`{` + msgs + `,"n":2}`, false, false},
		"budgets as numbers":       {`{` + msgs + `,"max_tokens":60.0,"max_completion_tokens":6e1,"min_tokens":null}`, false, true},
		"max_tokens quoted":        {`{` + msgs + `,"max_tokens":"60"}`, false, false},
		"max_completion quoted":    {`{` + msgs + `,"max_completion_tokens":"60"}`, false, false},
		"min_tokens quoted":        {`{` + msgs + `,"min_tokens":"1"}`, false, false},
		"tools":                    {`{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, false, false},
		"functions":                {`{` + msgs + `,"functions":[]}`, false, false},
		"json output":              {`{` + msgs + `,"response_format":{"type":"json_object"}}`, false, false},
		"structured outputs":       {`{` + msgs + `,"structured_outputs":{"regex":"a+"}}`, false, false},
		"guided":                   {`{` + msgs + `,"guided_choice":["a","b"]}`, false, false},
		"echo":                     {`{` + msgs + `,"echo":true}`, false, false},
		"client tokens":            {`{` + msgs + `,"tokens":{"token_ids":[1]}}`, false, false},
		"client continuation":      {`{` + msgs + `,"continue_final_message":true,"add_generation_prompt":false}`, false, false},
		"no generation prompt":     {`{` + msgs + `,"add_generation_prompt":false}`, false, false},
		"stream uncounted":         {`{` + msgs + `,"stream":true}`, true, false},
		"stream without its usage": {`{` + msgs + `,"stream":true,"stream_options":{"include_usage":false}}`, true, false},
		"stream with usage":        {`{` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		"stream with token ids":    {`{` + msgs + `,"stream":true,"return_token_ids":true}`, true, true},
		"stream with logprobs":     {`{` + msgs + `,"stream":true,"logprobs":true}`, true, true},
	} {
		doc, err := requestbody.Parse([]byte(tc.body), legs.FormatChat)
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, ChatContinuable(doc.Root(), tc.stream), name)
	}
}

func TestChatContinuationStreamKeepsARoleNeverSent(t *testing.T) {
	t.Parallel()
	c := newChatContinuation(t, `{"model":"m","messages":[],"max_tokens":4,"stream":true,"logprobs":true}`, true, 1<<20)
	out, err := c.Event([]byte(chunk("a", `{}`, `"abort"`))) // aborted before its first token
	require.NoError(t, err)
	assert.JSONEq(t, chunk("a", `{}`, "null"), string(out))
	_, err = c.Event([]byte("[DONE]"))
	require.NoError(t, err)
	require.True(t, c.Aborted())
	_, err = c.NextBody()
	require.NoError(t, err)
	role := chunk("b", `{"role":"assistant","content":""}`, "null")
	out, err = c.Event([]byte(role))
	require.NoError(t, err)
	assert.JSONEq(t, chunk("a", `{"role":"assistant","content":""}`, "null"), string(out), "the answer's one role")
}

// BenchmarkChatContinuationEvent is the cost a continued stream adds to
// each chat event no pause aborted.
func BenchmarkChatContinuationEvent(b *testing.B) {
	doc, err := requestbody.Parse([]byte(`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`), legs.FormatChat)
	require.NoError(b, err)
	c := NewChatContinuation(doc.Root().Clone(), func() bool { return true }, 1<<30)
	ev := []byte(chunk("chatcmpl-0123456789abcdef", `{"content":" coordinator"}`, "null"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Event(ev); err != nil {
			b.Fatal(err)
		}
	}
}
