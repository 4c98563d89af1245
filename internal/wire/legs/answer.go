package legs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/membudget"
)

// Cap is the most a leg's buffered answer may hold: the leg, the bytes,
// and the config key that sets them ("" for a fixed cap).
type Cap struct {
	Leg string
	Max int64
	Key string
}

// TooLargeError is an answer longer than its Cap. The client gets 502
// naming the leg and the cap; the leg's connection is closed, not reused
// (the answer's body is closed before its end).
type TooLargeError struct{ Cap Cap }

func (e *TooLargeError) Error() string {
	msg := fmt.Sprintf("%s answer larger than %d MiB", e.Cap.Leg, e.Cap.Max>>20)
	if e.Cap.Max < 1<<20 {
		msg = fmt.Sprintf("%s answer larger than %d bytes", e.Cap.Leg, e.Cap.Max)
	}
	if e.Cap.Key != "" {
		msg += " (" + e.Cap.Key + ")"
	}
	return msg
}

// ReadBody reads a 2xx answer's whole body, at most c.Max bytes (a longer
// one is a *TooLargeError, found as its byte c.Max+1 arrives), growing with
// the bytes that arrive whatever Content-Length the worker announced, and
// drawing them from the account of ctx (membudget.ReadAll).
func ReadBody(ctx context.Context, resp *http.Response, c Cap) ([]byte, error) {
	body, err := membudget.ReadAll(ctx, resp.Body, resp.ContentLength, c.Max)
	if errors.Is(err, membudget.ErrTooLarge) {
		return nil, &TooLargeError{Cap: c}
	}
	return body, err
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
	// The callers have no request context at hand: the read grows with
	// the bytes, within MaxAnswerSize, but draws from no account.
	body, err := ReadBody(context.Background(), resp, Cap{Leg: leg, Max: MaxAnswerSize})
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", leg, err)
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
