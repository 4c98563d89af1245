package legs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// ReadBody reads a 2xx answer's whole body, up to max bytes and one
// more (a longer answer is for the caller to refuse), into a buffer of the
// size its Content-Length announces when the worker sent one (up to
// MaxAnswerSize), rather than growing a buffer as the bytes arrive.
func ReadBody(resp *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, max+1)
	if n := resp.ContentLength; n > 0 && n <= max && n <= MaxAnswerSize {
		buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
		_, err := buf.ReadFrom(r)
		return buf.Bytes(), err
	}
	return io.ReadAll(r)
}

// MaxAnswerSize bounds the body of an encode or prefill answer.
const MaxAnswerSize = 64 << 20

// AnswerParams reads a leg's 2xx answer, closes it, and returns a copy of
// its top-level member key when that is a JSON object (even empty), or nil
// when the member is absent, null or not an object. An answer that is not a
// JSON object is an error (a worker that streamed, say); so is one larger
// than MaxAnswerSize. A 204 answer has no body and so no params.
func AnswerParams(resp *http.Response, leg, key string) (json.RawMessage, error) {
	obj, err := ReadAnswer(resp, leg)
	if err != nil || obj == nil {
		return nil, err
	}
	return ObjectMember(obj, key), nil
}

// ReadAnswer reads a leg's 2xx answer as a JSON object and closes it; a 204
// answer gives nil. The object aliases the body read, nothing else does.
func ReadAnswer(resp *http.Response, leg string) (*jsonbody.Object, error) {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	body, err := ReadBody(resp, MaxAnswerSize)
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", leg, err)
	}
	if len(body) > MaxAnswerSize {
		return nil, fmt.Errorf("%s: answer larger than %d bytes", leg, MaxAnswerSize)
	}
	obj, err := jsonbody.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", leg, err)
	}
	return obj, nil
}

// ObjectMember is a copy of obj's member key when that is a JSON object,
// else nil.
func ObjectMember(obj *jsonbody.Object, key string) json.RawMessage {
	raw, ok := obj.Get(key)
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	return bytes.Clone(raw)
}
