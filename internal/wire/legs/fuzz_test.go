package legs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// FuzzAnswerParams reads kv_transfer_params out of an arbitrary prefill
// answer the way the prefill step does (seeds here and in
// testdata/fuzz/FuzzAnswerParams), and hands it to the NIXL connector. No
// panic; an answer that is not one JSON object (valid UTF-8) is an error;
// otherwise the params are the last kv_transfer_params member's bytes when
// it is an object, nil when it is absent or another kind, and the
// connector takes them.
func FuzzAnswerParams(f *testing.F) {
	for _, seed := range []string{
		`{"id":"x","choices":[],"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[1,2]}}`,
		`{"kv_transfer_params":null}`, `{"kv_transfer_params":[]}`, `{"kv_transfer_params":"x"}`, `{}`,
		`{"kv_transfer_params":{"a":1},"kv_transfer_params":{"b":2}}`,
		`{"kv_transfer_params":{ "a" : [ 1 ] }}`, `{"kv_transfer_params":{"a":1}`, `[]`, `null`, ``,
		"{\"kv_transfer_params\":{\"a\":\"\xff\"}}", "data: {}\n\n",
	} {
		f.Add([]byte(seed))
	}
	nixl := kv.NewNIXL()
	f.Fuzz(func(t *testing.T, answer []byte) {
		resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(answer))}
		got, err := AnswerParams(resp, "prefill", "kv_transfer_params")
		if errors.Is(err, jsonbody.ErrTooDeep) {
			return // encoding/json allows deeper documents
		}
		var members map[string]json.RawMessage
		isObject := utf8.Valid(answer) && json.Unmarshal(answer, &members) == nil && members != nil
		if !isObject {
			assert.Error(t, err)
			return
		}
		require.NoError(t, err)
		want := members["kv_transfer_params"]
		if len(want) == 0 || want[0] != '{' {
			assert.Nil(t, got)
			return
		}
		assert.Equal(t, string(want), string(got))
		params, err := nixl.DecodeParams(got)
		require.NoError(t, err)
		assert.True(t, json.Valid(params))
	})
}
