package tokens

import (
	"bytes"
	"strconv"
)

// The JSON scanner fastAnswer reads with: each method reads one value (or
// punctuation) at the position, or reports false and leaves the answer to
// encoding/json.

// fastScan is a position in an answer's bytes.
type fastScan struct {
	data []byte
	i    int
	sc   *scratch // what the decoded slices are windows of
}

// maxFastDepth bounds the nesting of the members fastAnswer skips.
const maxFastDepth = 64

// object reads an object, calling member with each key (unescaped: a key
// with an escape gives up) positioned at its value, which member reads.
func (s *fastScan) object(member func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	s.space()
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.space()
		if !s.byte(':') {
			return false
		}
		s.space()
		if !member(key) {
			return false
		}
		s.space()
		if s.byte(',') {
			s.space()
			continue
		}
		return s.byte('}')
	}
}

// array reads an array, calling elem positioned at each element.
func (s *fastScan) array(elem func() bool) bool {
	if !s.byte('[') {
		return false
	}
	s.space()
	if s.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.space()
		if s.byte(',') {
			s.space()
			continue
		}
		return s.byte(']')
	}
}

// skip checks and passes any JSON value.
func (s *fastScan) skip(depth int) bool {
	if depth > maxFastDepth || s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case c == '"':
		_, ok := s.plainString()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	_, ok := s.number()
	return ok
}

// raw keeps a copy of the value's text, as json.RawMessage does.
func (s *fastScan) raw(dst *[]byte) bool {
	start := s.i
	if !s.skip(0) {
		return false
	}
	*dst = bytes.Clone(s.data[start:s.i])
	return true
}

// stringValue hands f a string value's text, quotes included.
func (s *fastScan) stringValue(f func(raw []byte) bool) bool {
	start := s.i
	if _, ok := s.plainString(); !ok {
		return false
	}
	return f(s.data[start:s.i])
}

// plainString reads a string without escapes and returns its content.
func (s *fastScan) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.data) && plainByte[s.data[s.i]] {
		s.i++
	}
	if s.i < len(s.data) && s.data[s.i] == '"' {
		s.i++
		return s.data[start : s.i-1], true
	}
	return nil, false // an escape, a control character or the end
}

// plainByte marks the bytes a plain string holds as they are: any but the
// quote, the backslash and the control characters.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < len(t); c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// number reads a JSON number and returns its text.
func (s *fastScan) number() ([]byte, bool) {
	start := s.i
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.digits() == 0:
		return nil, false
	}
	if s.byte('.') && s.digits() == 0 {
		return nil, false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if s.digits() == 0 {
			return nil, false
		}
	}
	return s.data[start:s.i], true
}

func (s *fastScan) digits() int {
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// uint32 reads a number that is an unsigned integer in range.
func (s *fastScan) uint32(dst *uint32) bool {
	text, ok := s.number()
	if !ok {
		return false
	}
	v, ok := parseUint32(text)
	*dst = v
	return ok
}

// uint32s reads an array of token IDs; null leaves it nil.
func (s *fastScan) uint32s(dst *[]uint32) bool {
	if s.null() {
		return true
	}
	var ok bool
	*dst, ok = pooledArray(s, &s.sc.tokenIDs, s.uint32)
	return ok
}

// float32 reads a number as encoding/json reads one into a float32.
func (s *fastScan) float32(dst *float32) bool {
	text, ok := s.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(string(text), 32)
	*dst = float32(v)
	return err == nil
}

// null reads a null, if that is what comes next.
func (s *fastScan) null() bool {
	return s.literal("null")
}

func (s *fastScan) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// byte reads c, if that is what comes next.
func (s *fastScan) byte(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *fastScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
