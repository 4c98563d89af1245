package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// This file holds what the encode and prefill legs share: the wire format
// they emit, the single-token cap, and reading a transfer-params object
// from a worker's answer.

// resolveFormat is the format an encode or prefill leg is written in (and
// the path it posts to), given the client's API and the step's
// use_openai_format: a completions request stays completions; otherwise the
// flag off means the tokens-in generate format, on means the client's own.
func resolveFormat(inbound Format, useOpenAIFormat bool) Format {
	switch {
	case inbound == FormatCompletions:
		return FormatCompletions
	case !useOpenAIFormat:
		return FormatGenerate
	default:
		return inbound
	}
}

// capSingleToken makes a leg body produce exactly one token and answer as
// one JSON document: max_tokens := 1 (on sampling_params for generate,
// created when missing) with min_tokens removed beside it, the top-level
// max_completion_tokens and max_output_tokens := 1 when present (decision
// D11), stream := false and stream_options removed. Every other member is
// kept byte for byte. A generate sampling_params that is not an object is a
// client error.
func capSingleToken(obj *jsonbody.Object, f Format) error {
	target := obj
	if f == FormatGenerate {
		sp, err := editChild(obj, keySamplingParams)
		if err != nil {
			return err
		}
		target = sp
	}
	target.Set("max_tokens", []byte("1"))
	target.Delete("min_tokens")
	for _, key := range [...]string{"max_completion_tokens", "max_output_tokens"} {
		if _, ok := obj.Get(key); ok {
			obj.Set(key, []byte("1"))
		}
	}
	obj.Set("stream", []byte("false"))
	obj.Delete("stream_options")
	return nil
}

// readBody reads a 2xx answer's whole body, up to max bytes and one
// more (a longer answer is for the caller to refuse), into a buffer of the
// size its Content-Length announces when the worker sent one (up to
// maxAnswerSize), rather than growing a buffer as the bytes arrive.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, max+1)
	if n := resp.ContentLength; n > 0 && n <= max && n <= maxAnswerSize {
		buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
		_, err := buf.ReadFrom(r)
		return buf.Bytes(), err
	}
	return io.ReadAll(r)
}

// maxAnswerSize bounds the body of an encode or prefill answer.
const maxAnswerSize = 64 << 20

// answerParams reads a leg's 2xx answer, closes it, and returns a copy of
// its top-level member key when that is a JSON object (even empty), or nil
// when the member is absent, null or not an object. An answer that is not a
// JSON object is an error (a worker that streamed, say); so is one larger
// than maxAnswerSize. A 204 answer has no body and so no params.
func answerParams(resp *http.Response, leg, key string) (json.RawMessage, error) {
	obj, err := readAnswer(resp, leg)
	if err != nil || obj == nil {
		return nil, err
	}
	return objectMember(obj, key), nil
}

// readAnswer reads a leg's 2xx answer as a JSON object and closes it; a 204
// answer gives nil. The object aliases the body read, nothing else does.
func readAnswer(resp *http.Response, leg string) (*jsonbody.Object, error) {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	body, err := readBody(resp, maxAnswerSize)
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", leg, err)
	}
	if len(body) > maxAnswerSize {
		return nil, fmt.Errorf("%s: answer larger than %d bytes", leg, maxAnswerSize)
	}
	obj, err := jsonbody.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", leg, err)
	}
	return obj, nil
}

// objectMember is a copy of obj's member key when that is a JSON object,
// else nil.
func objectMember(obj *jsonbody.Object, key string) json.RawMessage {
	raw, ok := obj.Get(key)
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	return bytes.Clone(raw)
}
