package jsonbody

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxDepth is the deepest nesting of objects and arrays a document may have;
// the top-level object or array is depth 1. Deeper documents fail with
// [ErrTooDeep]. Validation does not recurse, so hostile nesting cannot exhaust
// the goroutine stack; the limit keeps out bodies that recursive parsers
// further down the line would choke on.
const MaxDepth = 512

var (
	// ErrNotObject is returned by [ParseObject] for a valid JSON document whose
	// top level is not an object (including the literal null).
	ErrNotObject = errors.New("json body is not an object")
	// ErrNotArray is returned by [ParseArray] and [Uint32s] for a valid JSON
	// document whose top level is not an array.
	ErrNotArray = errors.New("json value is not an array")
	// ErrTooDeep is returned, wrapped with the offset, when objects and arrays
	// nest deeper than [MaxDepth].
	ErrTooDeep = errors.New("json nesting exceeds max depth")
)

// SyntaxError describes malformed JSON. Offset is the zero-based byte offset of
// the offending character, or the input length for a truncated document.
type SyntaxError struct {
	Offset int64
	Msg    string
	// Path names the member or element the offending character is in, as
	// keys joined by dots and array indexes in brackets
	// ("messages[1].content"); empty at the top level.
	Path string
}

// Error returns Msg followed by the offset and the path, e.g.
// "invalid character 'x' looking for beginning of value at offset 12 (in n[2])".
func (e *SyntaxError) Error() string {
	s := e.Msg + " at offset " + strconv.FormatInt(e.Offset, 10)
	if e.Path != "" {
		s += " (in " + e.Path + ")"
	}
	return s
}

// located fills in the Path of a *SyntaxError about data, once, where an
// exported function returns it (computing it costs a second walk of data up
// to the error, which only failing documents pay).
func located(data []byte, err error) error {
	if se, ok := err.(*SyntaxError); ok && se.Path == "" {
		se.Path = pathAt(data, int(se.Offset))
	}
	return err
}

// errAt reports the character at data[i] (or the end of input when i is past
// the end) with a context phrase such as "after object key".
func errAt(data []byte, i int, context string) error {
	if i >= len(data) {
		return &SyntaxError{Offset: int64(len(data)), Msg: "unexpected end of JSON input"}
	}
	msg := "invalid character " + quoteChar(data[i])
	if context != "" {
		msg += " " + context
	}
	return &SyntaxError{Offset: int64(i), Msg: msg}
}

// errUTF8 reports a byte at offset i, inside a string, that does not start
// a valid UTF-8 sequence.
func errUTF8(i int) error {
	return &SyntaxError{Offset: int64(i), Msg: "invalid UTF-8 in string literal"}
}

// errDepth reports nesting deeper than MaxDepth at data[i].
func errDepth(i int) error {
	return fmt.Errorf("%w (%d) at offset %d", ErrTooDeep, MaxDepth, i)
}

// quoteChar formats c the way encoding/json does in its syntax errors.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
