package tokens

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastAnswerSeeds are answers and events of the usual shapes, and near
// misses fastAnswer must leave to encoding/json.
var fastAnswerSeeds = []string{
	`{"choices":[{"index":0,"token_ids":[1,2],"finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1}},"prompt_logprobs":[null,{"5":{"logprob":-1.5,"rank":1}}]}`,
	`{"choices":[{"index":1,"token_ids":[],"finish_reason":null,"logprobs":{"content":[]}}],"usage":null}`,
	` { "choices" : [ { "index" : 2 , "token_ids" : [ 7 ] , "logprobs" : { "content" : [ { "token" : "token_id:7" , "logprob" : -0.5e1 , "top_logprobs" : [ ] } ] } } ] } `,
	`{"object":"error","message":"boom","type":"InternalServerError","code":503}`,
	`{"error":{"message":"bad","code":400}}`,
	`{"error":null,"choices":null}`,
	`{"Choices":[]}`,
	`{"choices":[],"choices":[]}`,
	`{"chOices":[]}`,
	`{"choices":[{"index":-1}]}`,
	`{"choices":[{"index":4294967296}]}`,
	`{"choices":[{"index":1.0}]}`,
	`{"choices":[{"token_ids":[01]}]}`,
	`{"choices":[{"logprobs":{"content":[{"token":"token_id:\u0031","logprob":1}]}}]}`,
	`{"choices":[{"logprobs":{"content":[{"token":"token_id:1","logprob":1e39}]}}]}`,
	`{"choices":[{"logprobs":{"content":[{"token":"tok","logprob":1}]}}]}`,
	`{"choices":[{"finish_reason":5}]}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":null}}}`,
	`{"extra":{"a":[1,true,false,null,"x",{"b":-0.0E+1}]},"choices":[]}`,
	`{"\u0063hoices":[]}`,
	"{\"choices\":[],\"x\":\"\x01\"}",
	`{"choices":[]} x`,
	`null`,
	`{"choices":[null]}`,
	`{"ſhoices":[]}`,
	`{"request_id":"a\"b\u00e9","choices":[{"finish_reason":"st\u006fp"}]}`,
	`{"choices":[{"index":0,"logprobs":{"content":[{"token":"token_id:\u0035","logprob":-1,"bytes":[1,2]}]},"token_ids":[5]}]}`,
	"{\"choices\":[],\"x\":\"\xff\"}",
	`{"choices":[],"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	// weight_versions: the usual, then near misses.
	finalEvent,
	`{"choices":[{"index":0,"token_ids":[1,2],"weight_versions":[{"version":"v1","start":0,"end":1},{"version":"v\u00e92","start":1,"end":2}]}]}`,
	`{"choices":[{"weight_versions":null},{"weight_versions":[]},{"weight_versions":[{}]}]}`,
	`{"choices":[{"weight_versions":[{"version":null,"start":0,"end":0,"x":[1]}]}]}`,
	`{"choices":[{"weight_versions":[null]}]}`,
	`{"choices":[{"weight_versions":[{"version":"v1","start":-1,"end":1}]}]}`,
	`{"choices":[{"weight_versions":[{"version":"v1","start":0,"end":4294967296}]}]}`,
	`{"choices":[{"weight_versions":[{"version":"v1","start":0,"end":1e0}]}]}`,
	`{"choices":[{"weight_versions":[{"version":1,"start":0,"end":1}]}]}`,
	`{"choices":[{"weight_versions":[{"version":"a","version":"b"}]}]}`,
	`{"choices":[{"weight_versions":[{"Version":"a","END":1}]}]}`,
	`{"choices":[{"weight_versions":[{"version":"\ud800"}]}]}`,
	`{"choices":[{"weight_versions":[],"weight_versions":[]}]}`,
	`{"choices":[{"Weight_Versions":[]}]}`,
	`{"choices":[{"weight_versions":{}}]}`,
}

// finalEvent is a choice's last event of a vLLM stream: the finish reason
// and the weight versions of its whole output.
const finalEvent = `{"request_id":"generate-tokens-0b8f2c6e","choices":[{"index":0,"logprobs":null,"finish_reason":"length","token_ids":[151643],` +
	`"routed_experts":null,"weight_versions":[{"version":"v1","start":0,"end":3},{"version":"v2","start":3,"end":4}]}]}`

func TestFastAnswerReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for k := -1; k <= 20; k += 3 {
		checkFastAnswer(t, streamEvent(k))
	}
	for _, s := range fastAnswerSeeds {
		checkFastAnswer(t, []byte(s))
	}
	var sc scratch
	assert.True(t, fastAnswer(streamEvent(5), sc.newAnswer(), &sc), "the usual event is read without encoding/json")
	assert.True(t, fastAnswer([]byte(finalEvent), sc.newAnswer(), &sc), "the final event is read without encoding/json")
	assert.False(t, fastAnswer([]byte(`{"Choices":[]}`), sc.newAnswer(), &sc), "a key in another case is encoding/json's")
	for _, escaped := range []string{
		`{"request_id":"a\"b","choices":[{"index":1}]}`,
		`{"\u0063hoices":[{"index":1}]}`,
		`{"choices":[{"index":1,"finish_reason":"st\u006fp"}]}`,
	} {
		a := sc.newAnswer()
		require.True(t, fastAnswer([]byte(escaped), a, &sc), "an escape is read without encoding/json: %s", escaped)
		assert.Equal(t, uint32(1), a.Choices[0].Index, "%s", escaped)
	}
}

// checkFastAnswer: whatever fastAnswer takes, encoding/json takes and
// reads the same, also into a scratch an earlier event used.
func checkFastAnswer(t *testing.T, data []byte) {
	t.Helper()
	var sc scratch
	fast := sc.newAnswer()
	if !fastAnswer(data, fast, &sc) {
		return
	}
	var slow generateAnswer
	require.NoError(t, json.Unmarshal(data, &slow), "%s", data)
	require.Equal(t, slow, *fast, "%s", data)

	require.True(t, fastAnswer(usedScratchEvent, sc.newAnswer(), &sc))
	again := sc.newAnswer()
	require.True(t, fastAnswer(data, again, &sc))
	require.Equal(t, slow, *again, "%s after another event", data)
}

// usedScratchEvent fills a scratch before it reads again: two choices,
// each with tokens, logprobs and top logprobs.
var usedScratchEvent = []byte(`{"choices":[` +
	`{"index":3,"token_ids":[7,8],"finish_reason":"stop","logprobs":{"content":[` +
	`{"token":"token_id:7","logprob":-1,"top_logprobs":[{"token":"token_id:7","logprob":-1},{"token":"token_id:9","logprob":-2}]},` +
	`{"token":"token_id:8","logprob":-3,"top_logprobs":[{"token":"token_id:8","logprob":-3}]}]}},` +
	`{"index":1,"token_ids":[5],"logprobs":{"content":[{"token":"token_id:5","logprob":-4,"top_logprobs":[]}]}}],` +
	`"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}`)

func FuzzFastAnswer(f *testing.F) {
	for k := -1; k <= 5; k++ {
		f.Add(streamEvent(k))
	}
	for _, s := range fastAnswerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastAnswer(t, data) })
}
