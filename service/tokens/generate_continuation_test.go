package tokens

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// generateBody is a client's /inference/v1/generate body: a prompt of 3,
// a budget of 10 (at least 4), logprobs, prompt logprobs, its own
// transfer params and a field the coordinator does not own.
const generateBody = `{"model":"m","token_ids":[1, 2,3],"sampling_params":{"max_tokens":10,"min_tokens":4,"prompt_logprobs":1,"logprobs":1},` +
	`"kv_transfer_params":{"do_remote_decode":true},"priority":5}`

// newGenerateContinuation carries generateBody, holding each abort back
// when hold says so, keeping up to maxBytes of output.
func newGenerateContinuation(t *testing.T, hold bool, maxBytes int64) *GenerateContinuation {
	t.Helper()
	doc, err := requestbody.Parse([]byte(generateBody), legs.FormatGenerate)
	require.NoError(t, err)
	return NewGenerateContinuation(doc.Root().Clone(), func() bool { return hold }, maxBytes)
}

// lp is a logprobs.content entry of token id.
func lp(id string) string {
	return `{"token":"token_id:` + id + `","logprob":-0.` + id + `,"top_logprobs":[]}`
}

// The first run: 3 tokens, then the pause's abort.
var abortedAnswer = `{"request_id":"leg-1","choices":[{"index":0,"logprobs":{"content":[` + lp("7") + `,` + lp("8") + `,` + lp("9") + `]},` +
	`"finish_reason":"abort","token_ids":[7,8,9],"weight_versions":[{"version":"v1","start":0,"end":3}]}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":2}},"prompt_logprobs":[null,{"2":{"logprob":-1}},{"3":{"logprob":-1}}]}`

func TestGenerateContinuationUnary(t *testing.T) {
	t.Parallel()
	g := newGenerateContinuation(t, true, 1<<20)
	out, err := g.Answer([]byte(abortedAnswer))
	require.NoError(t, err)
	assert.Nil(t, out, "the abort is held back")
	require.True(t, g.Aborted())
	assert.Equal(t, 3, g.Generated())

	body, err := g.NextBody()
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","token_ids":[1,2,3,7,8,9],"sampling_params":{"max_tokens":7,"min_tokens":1,"logprobs":1},"priority":5}`, string(body))
	assert.False(t, g.Aborted())

	last := `{"request_id":"leg-2","choices":[{"index":0,"logprobs":{"content":[` + lp("10") + `,` + lp("11") + `]},` +
		`"finish_reason":"length","token_ids":[10,11],"weight_versions":[{"version":"v2","start":0,"end":2}]}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":2,"total_tokens":8},"prompt_logprobs":null}`
	out, err = g.Answer([]byte(last))
	require.NoError(t, err)
	assert.False(t, g.Aborted())
	assert.JSONEq(t, `{"request_id":"leg-1","choices":[{"index":0,"logprobs":{"content":[`+lp("7")+`,`+lp("8")+`,`+lp("9")+`,`+lp("10")+`,`+lp("11")+`]},`+
		`"finish_reason":"length","token_ids":[7,8,9,10,11],"weight_versions":[{"version":"v1","start":0,"end":3},{"version":"v2","start":3,"end":5}]}],`+
		`"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}},"prompt_logprobs":[null,{"2":{"logprob":-1}},{"3":{"logprob":-1}}]}`,
		string(out), "one answer: every token, logprob and span once, usage of the client's prompt")
}

// TestGenerateContinuationRelaysUncontinued: an answer no pause aborted,
// and an abort not held back, go out as the worker's very bytes.
func TestGenerateContinuationRelaysUncontinued(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		hold bool
		max  int64
		body string
	}{
		"no abort":            {hold: true, max: 1 << 20, body: `{"choices":[{"index":0,"finish_reason":"length","token_ids":[7]}],"usage":null}`},
		"abort in a string":   {hold: true, max: 1 << 20, body: `{"choices":[{"index":0,"finish_reason":"stop","token_ids":[7]}],"note":"abort"}`},
		"not from a pause":    {hold: false, max: 1 << 20, body: abortedAnswer},
		"past the answer cap": {hold: true, max: 8, body: abortedAnswer},
		"not an answer":       {hold: true, max: 1 << 20, body: `{"error":{"message":"abort","code":500}}`},
	} {
		g := newGenerateContinuation(t, c.hold, c.max)
		body := []byte(c.body)
		out, err := g.Answer(body)
		require.NoError(t, err, name)
		require.NotEmpty(t, out, name)
		assert.Same(t, &body[0], &out[0], "%s: the worker's bytes", name)
		assert.False(t, g.Aborted(), name)
	}
}

func TestGenerateContinuationStream(t *testing.T) {
	t.Parallel()
	g := newGenerateContinuation(t, true, 1<<20)
	pass := func(data string, want string) {
		t.Helper()
		in := []byte(data)
		out, err := g.Event(in)
		require.NoError(t, err)
		switch want {
		case "":
			assert.Nil(t, out, "withheld: %s", data)
		case data:
			require.NotEmpty(t, out)
			assert.Same(t, &in[0], &out[0], "as the worker sent it: %s", data)
		default:
			assert.JSONEq(t, want, string(out))
		}
	}
	tok := `{"request_id":"leg-1","choices":[{"index":0,"logprobs":{"content":[` + lp("7") + `]},"finish_reason":null,"token_ids":[7]}]}`
	pass(tok, tok)
	pass(`{"request_id":"leg-1","choices":[{"index":0,"logprobs":null,"finish_reason":"abort","token_ids":[8],"weight_versions":[{"version":"v1","start":0,"end":2}]}]}`,
		`{"request_id":"leg-1","choices":[{"index":0,"logprobs":null,"finish_reason":null,"token_ids":[8]}]}`)
	require.True(t, g.Aborted())
	pass(`{"request_id":"leg-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1}}}`, "")
	pass(`[DONE]`, "")
	body, err := g.NextBody()
	require.NoError(t, err)
	assert.Contains(t, string(body), `"token_ids":[1,2,3,7,8]`)

	pass(`{"request_id":"leg-2","choices":[{"index":0,"logprobs":null,"finish_reason":null,"token_ids":[9]}]}`,
		`{"request_id":"leg-1","choices":[{"index":0,"logprobs":null,"finish_reason":null,"token_ids":[9]}]}`)
	pass(`{"request_id":"leg-2","choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[10],"weight_versions":[{"version":"v2","start":0,"end":2}]}]}`,
		`{"request_id":"leg-1","choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[10],`+
			`"weight_versions":[{"version":"v1","start":0,"end":2},{"version":"v2","start":2,"end":4}]}]}`)
	pass(`{"request_id":"leg-2","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`{"request_id":"leg-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}}`)
	pass(`[DONE]`, `[DONE]`)
	assert.False(t, g.Aborted())
	assert.Equal(t, 4, g.Generated())
}

func TestGenerateContinuable(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"token_ids":[1]}`:                                                       true,
		`{"token_ids":[1],"sampling_params":null}`:                                true,
		`{"token_ids":[1],"sampling_params":{}}`:                                  true,
		`{"token_ids":[1],"sampling_params":{"n":null}}`:                          true,
		`{"token_ids":[1],"sampling_params":{"n":1}}`:                             true,
		`{"token_ids":[1],"sampling_params":{"n":1.0}}`:                           true,
		`{"token_ids":[1],"sampling_params":{"n":2}}`:                             false,
		`{"token_ids":[1],"sampling_params":{"n":"2"}}`:                           false,
		`{"token_ids":[1],"sampling_params":{"max_tokens":3}}`:                    true,
		`{"token_ids":[1],"sampling_params":{"max_tokens":3e0,"min_tokens":1.0}}`: true,
		`{"token_ids":[1],"sampling_params":{"max_tokens":"3"}}`:                  false,
		`{"token_ids":[1],"sampling_params":{"min_tokens":"1"}}`:                  false,
	} {
		doc, err := requestbody.Parse([]byte(body), legs.FormatGenerate)
		require.NoError(t, err)
		assert.Equal(t, want, GenerateContinuable(doc.Root()), body)
	}
}

// BenchmarkGenerateContinuationEvent is the cost a continued stream adds
// to each event no pause aborted: reading its tokens.
func BenchmarkGenerateContinuationEvent(b *testing.B) {
	doc, err := requestbody.Parse([]byte(generateBody), legs.FormatGenerate)
	require.NoError(b, err)
	g := NewGenerateContinuation(doc.Root().Clone(), func() bool { return true }, 1<<40)
	top := `{"token":"token_id:17","logprob":-1.25},{"token":"token_id:18","logprob":-2.5},{"token":"token_id:19","logprob":-3.75}`
	event := []byte(`{"request_id":"leg-1","choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:7","logprob":-0.5,"top_logprobs":[` + top + `]}]},` +
		`"finish_reason":null,"token_ids":[7]}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Event(event); err != nil {
			b.Fatal(err)
		}
	}
}
