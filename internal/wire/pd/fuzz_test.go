package pd

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// FuzzPDAnswer passes an arbitrary prefill answer and an arbitrary decode
// answer (whole, then as one event of a stream) through ReadPrefillAnswer
// and AnswerSink, for each client format (seeds here and in
// testdata/fuzz/FuzzPDAnswer). No panic, no error; a decode answer that is
// one JSON object reaches the client as one JSON object, with every
// top-level member D21 and D22 do not own as the worker sent it; any other
// decode answer reaches it unchanged.
func FuzzPDAnswer(f *testing.F) {
	lp := `[null,{"5":{"logprob":-1,"rank":1,"decoded_token":"a"}}]`
	echo := `{"choices":[{"index":0,"text":"Hi é","logprobs":{"text_offset":[0,2],"token_logprobs":[null,-1],"tokens":["Hi"," é"],"top_logprobs":[null,{" é":-1}]},"prompt_logprobs":` + lp + `}],"usage":{"prompt_tokens_details":{"cached_tokens":3}}}`
	for _, seed := range []struct {
		prefill, decode string
		format          uint8
	}{
		{`{"usage":{"prompt_tokens_details":{"cached_tokens":16}},"prompt_logprobs":` + lp + `}`,
			`{"id":"x","choices":[{"index":0}],"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":40}}}`, 0},
		{echo, `{"choices":[{"index":0,"text":" a","logprobs":{"text_offset":[0],"token_logprobs":[-1],"tokens":[" a"],"top_logprobs":[{" a":-1}]}}]}`, 1},
		{echo, `{"choices":[{"index":0,"text":7,"logprobs":{"text_offset":"x","tokens":[1]}},3,{"index":"a"}]}`, 1},
		{`{"usage":{"prompt_tokens":5}}`, `{"usage":{"prompt_tokens_details":{"cached_tokens":5,"x":1}},"prompt_logprobs":null}`, 2},
		{`{"usage":[],"choices":{}}`, `{"usage":{"prompt_tokens_details":[]}}`, 0},
		{`{}`, `[DONE]`, 0}, {`{}`, `{"usage":`, 1}, {`{}`, "{\"usage\":{\"a\":\"\xff\"}}", 2},
	} {
		f.Add([]byte(seed.prefill), []byte(seed.decode), seed.format)
	}
	f.Fuzz(func(t *testing.T, prefill, decode []byte, format uint8) {
		f := legs.Format(format%3) + legs.FormatChat
		resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(prefill))}
		_, answer, err := ReadPrefillAnswer(resp, "prefill", f)
		if err != nil {
			return // not an answer the prefill step takes
		}
		decodeObj, parseErr := jsonbody.ParseObject(decode)
		for _, stream := range []bool{false, true} {
			sink := &steptest.Sink{}
			var usage Usage
			s := AnswerSink(sink, Request{Format: f, Stream: stream, Prefill: &answer, Usage: &usage})
			var out []byte
			if stream {
				require.NoError(t, s.Events([][]byte{decode, []byte("[DONE]")}, nil))
				require.Len(t, sink.Received, 2)
				out = sink.Received[0]
				assert.Equal(t, "[DONE]", string(sink.Received[1]))
			} else {
				require.NoError(t, s.Response(http.StatusOK, "application/json", decode))
				out = sink.Body
			}
			if parseErr != nil {
				assert.Equal(t, string(decode), string(out), "not a JSON object: as the worker sent it")
				continue
			}
			got, err := jsonbody.ParseObject(out)
			require.NoError(t, err, "stream=%t: %s", stream, out)
			for _, k := range decodeObj.Keys() {
				if k == keyUsage || k == keyChoices || k == bodykeys.PromptLogprobs {
					continue
				}
				want, _ := decodeObj.Get(k)
				have, _ := got.Get(k)
				assert.Equal(t, string(want), string(have), "member %q", k)
			}
			assert.True(t, json.Valid(out))
		}
	})
}
