package responses

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
)

// writeTimeout bounds the write of an answered response.
const writeTimeout = 10 * time.Second

// A stored response is one JSON object, its record:
//
//	{"input":[...],"ids":[...],"response":{...}}
//
// input: the items the request's legs got, as they got them (the history
// it continued included); ids: each input item's id, its own or a new
// msg_ one (NewID), for the input items listing; response: the response
// object as the worker answered it.
type record struct {
	input    []byte // a JSON array
	ids      []byte // a JSON array of strings, parallel to input
	response []byte // a JSON object
	output   []byte // response's "output", a JSON array ("[]" if none)
}

// appendRecord appends the record of answer, whose request's legs got
// input.
func appendRecord(dst, answer, input []byte) []byte {
	dst = append(dst, `{"input":`...)
	dst = append(dst, input...)
	dst = append(dst, `,"ids":[`...)
	_ = jsonbody.EachElement(input, func(i int, item []byte) error {
		if i > 0 {
			dst = append(dst, ',')
		}
		id, ok := itemID(item)
		if !ok {
			id = responsestore.NewID("msg")
		}
		dst = jsonbody.AppendString(dst, id)
		return nil
	})
	dst = append(dst, `],"response":`...)
	dst = append(dst, answer...)
	return append(dst, '}')
}

// parseRecord reads a stored record.
func parseRecord(value []byte) (record, error) {
	obj, err := jsonbody.ParseObject(value)
	if err != nil {
		return record{}, err
	}
	var r record
	var ok bool
	if r.input, ok = obj.Get("input"); !ok {
		return r, errors.New("record: no input")
	}
	if r.ids, ok = obj.Get("ids"); !ok {
		return r, errors.New("record: no ids")
	}
	if r.response, ok = obj.Get("response"); !ok {
		return r, errors.New("record: no response")
	}
	resp, err := jsonbody.ParseObject(r.response)
	if err != nil {
		return r, fmt.Errorf("record: response: %w", err)
	}
	if r.output, ok = resp.Get("output"); !ok || r.output[0] != '[' {
		r.output = []byte("[]")
	}
	return r, nil
}

// itemID is an item's own "id", when it has a non-empty string one.
func itemID(item []byte) (string, bool) {
	var obj jsonbody.Object
	if err := jsonbody.ParseObjectInto(&obj, item); err != nil {
		return "", false
	}
	id, ok := obj.String("id")
	return id, ok && id != ""
}

// responseID is the "id" of a response object.
func responseID(answer []byte) (string, bool) { return itemID(answer) }

// itemsOf is a Responses input as a JSON array of items: an array as it
// is, a string as one user message of one input_text part (the items
// OpenAI lists for it).
func itemsOf(input []byte) []byte {
	if len(input) == 0 || input[0] != '"' {
		return input
	}
	dst := append([]byte(nil), `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
	dst = append(dst, input...)
	return append(dst, "}]}]"...)
}

// concatArrays appends to dst one JSON array of the elements of each of
// arrays (each a JSON array).
func concatArrays(dst []byte, arrays ...[]byte) []byte {
	dst = append(dst, '[')
	first := true
	for _, a := range arrays {
		inner := innerOf(a)
		if len(inner) == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, inner...)
		first = false
	}
	return append(dst, ']')
}

// innerOf is what lies between an array's brackets, without surrounding
// whitespace.
func innerOf(a []byte) []byte {
	if len(a) < 2 {
		return nil
	}
	inner := a[1 : len(a)-1]
	for len(inner) > 0 && isSpace(inner[0]) {
		inner = inner[1:]
	}
	for len(inner) > 0 && isSpace(inner[len(inner)-1]) {
		inner = inner[:len(inner)-1]
	}
	return inner
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func isNotFound(err error) bool    { return errors.Is(err, responsestore.ErrNotFound) }
func isUnavailable(err error) bool { return errors.Is(err, responsestore.ErrUnavailable) }
func isTooLarge(err error) bool    { return errors.Is(err, responsestore.ErrTooLarge) }
func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
