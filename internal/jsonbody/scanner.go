package jsonbody

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// Scanner reads one JSON document from the front, value by value, into a
// caller's own types in one pass: nothing is indexed and no nested value
// is scanned twice, which suits a reader that knows the shape it expects
// (a worker's answer or stream event) and reads many of them.
//
// Each method reads what comes next, after any whitespace, and reports
// whether it could: false for malformed JSON, for a value of another kind
// than the method reads, or when a function the caller passed reported
// false. After false the position is undefined: the document is the
// caller's to read another way, typically with a full decoder. What a
// Scanner accepts is what [Valid] accepts (strings may hold escapes and
// must be valid UTF-8; nesting deeper than [MaxDepth] fails).
//
// Make one with [NewScanner]; the zero value reads an empty document. A
// Scanner keeps no reference past the document it reads and allocates
// only to unescape a member name (into a buffer it reuses). It is not safe
// for concurrent use.
type Scanner struct {
	data []byte
	i    int
	// depth is the number of objects and arrays open.
	depth int
	// name holds the last escaped member name, unescaped.
	name []byte
}

// NewScanner returns a Scanner at the start of data, which must not change
// while the Scanner or a slice it returned is in use.
func NewScanner(data []byte) Scanner { return Scanner{data: data} }

// Object reads an object, calling member with each member's name,
// positioned at the member's value, which member must read (or [Skip]).
// The name is unescaped as encoding/json unescapes it; it aliases the
// document when the key has no escape, else a buffer of the Scanner's,
// and holds only until member reads the value. Duplicate names are
// member's to handle.
func (s *Scanner) Object(member func(name []byte) bool) bool {
	if !s.open('{') {
		return false
	}
	if s.punct('}') {
		s.depth--
		return true
	}
	for {
		name, ok := s.key()
		if !ok || !s.punct(':') || !member(name) {
			return false
		}
		if s.punct(',') {
			continue
		}
		s.depth--
		return s.punct('}')
	}
}

// Array reads an array, calling elem positioned at each element, which
// elem must read (or Skip).
func (s *Scanner) Array(elem func() bool) bool {
	if !s.open('[') {
		return false
	}
	if s.punct(']') {
		s.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.punct(',') {
			continue
		}
		s.depth--
		return s.punct(']')
	}
}

// Null reads a null if that is what comes next and reports whether it
// did; else it reads nothing, and the value is the caller's to read.
func (s *Scanner) Null() bool {
	s.i = skipSpace(s.data, s.i)
	if !bytes.HasPrefix(s.data[s.i:], []byte("null")) {
		return false
	}
	s.i += len("null")
	return true
}

// Raw reads any value and returns its text, aliasing the document.
func (s *Scanner) Raw() ([]byte, bool) {
	s.i = skipSpace(s.data, s.i)
	start := s.i
	end, err := scanValue(s.data, start, s.depth)
	if err != nil {
		return nil, false
	}
	s.i = end
	return s.data[start:end], true
}

// Skip reads any value.
func (s *Scanner) Skip() bool {
	_, ok := s.Raw()
	return ok
}

// Quoted reads a string and returns its text, quotes and escapes included
// (unescape it with [String]), aliasing the document.
func (s *Scanner) Quoted() ([]byte, bool) {
	start := skipSpace(s.data, s.i)
	end, _, ok := s.str(start)
	if !ok {
		return nil, false
	}
	return s.data[start:end], true
}

// Number reads a number and returns its text, aliasing the document.
func (s *Scanner) Number() ([]byte, bool) {
	s.i = skipSpace(s.data, s.i)
	start := s.i
	if start >= len(s.data) || s.data[start] != '-' && !isDigit(s.data[start]) {
		return nil, false
	}
	end, err := scanNumber(s.data, start)
	if err != nil {
		return nil, false
	}
	s.i = end
	return s.data[start:end], true
}

// Uint32 reads a number that encoding/json reads into a uint32 (as
// strconv.ParseUint does): plain decimal digits, no sign, fraction or
// exponent, of a value below 2^32.
func (s *Scanner) Uint32() (uint32, bool) {
	text, ok := s.Number()
	if !ok || len(text) > len("4294967295") {
		return 0, false
	}
	var v uint64
	for _, c := range text {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}

// Float32 reads a number as encoding/json reads one into a float32:
// rounded to the nearest float32, refused when out of its range.
func (s *Scanner) Float32() (float32, bool) {
	text, ok := s.Number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(text), 32)
	return float32(v), err == nil
}

// End reads the whitespace after the document and reports whether that
// is all there is.
func (s *Scanner) End() bool {
	s.i = skipSpace(s.data, s.i)
	return s.i == len(s.data)
}

// open reads c, the start of an object or array, one level deeper.
func (s *Scanner) open(c byte) bool {
	s.depth++
	return s.depth <= MaxDepth && s.punct(c)
}

// punct reads c, if that is what comes next.
func (s *Scanner) punct(c byte) bool {
	s.i = skipSpace(s.data, s.i)
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// key reads a member's key and returns its name, unescaped.
func (s *Scanner) key() ([]byte, bool) {
	start := skipSpace(s.data, s.i)
	end, escaped, ok := s.str(start)
	if !ok {
		return nil, false
	}
	if !escaped {
		return s.data[start+1 : end-1], true
	}
	s.name = appendUnquoted(s.name[:0], s.data[start+1:end-1])
	return s.name, true
}

// str reads the string at data[start] and returns the index just past it
// and whether it holds escapes; on false, end is start.
func (s *Scanner) str(start int) (end int, escaped, ok bool) {
	data := s.data
	if start >= len(data) || data[start] != '"' {
		return start, false, false
	}
	// The usual key or value, short plain ASCII, byte by byte: for a few
	// bytes a table beats indexSpecial's word arithmetic.
	i := start + 1
	n := min(len(data), i+16)
	for i < n && plainASCII[data[i]] {
		i++
	}
	if i == n {
		i = indexSpecial(data, i)
	}
	if i < len(data) && data[i] == '"' {
		s.i = i + 1
		return s.i, false, true
	}
	end, escaped, err := scanString(data, start)
	if err != nil {
		return start, false, false
	}
	s.i = end
	return end, escaped, true
}

// plainASCII marks the bytes a string holds as they are, ASCII only: any
// but the quote, the backslash, the control characters and the bytes of
// multi-byte UTF-8 sequences (0x80 and up).
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
