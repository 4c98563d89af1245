package jsonbody

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// Valid reports the first syntax error of data, or nil when data is one
// complete JSON document (any top-level value, optional surrounding
// whitespace). It accepts exactly what encoding/json.Valid accepts, except
// that nesting deeper than [MaxDepth] fails with [ErrTooDeep] and, as RFC 8259
// §8.1 requires and Python's json does, invalid UTF-8 in a string fails (a
// [*SyntaxError] "invalid UTF-8 in string literal"). Like encoding/json it
// rejects a leading byte order mark. Errors are a [*SyntaxError] or wrap
// ErrTooDeep.
func Valid(data []byte) error {
	i, err := scanValue(data, skipSpace(data, 0), 0)
	if err != nil {
		return located(data, err)
	}
	return expectEnd(data, i)
}

// expectEnd checks that only whitespace follows the top-level value ending at i.
func expectEnd(data []byte, i int) error {
	if i = skipSpace(data, i); i < len(data) {
		return errAt(data, i, "after top-level value")
	}
	return nil
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(data []byte, i int) int {
	for ; i < len(data); i++ {
		if c := data[i]; c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			return i
		}
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// scanValue scans the value starting at data[i] (whitespace already skipped)
// and returns the index just past it. depth is the nesting depth of the
// enclosing container (0 at top level).
func scanValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, errAt(data, i, "")
	}
	switch c := data[i]; c {
	case '"':
		end, _, err := scanString(data, i)
		return end, err
	case '{', '[':
		return scanContainer(data, i, depth, nil)
	case 't':
		if hasLiteral(data, i, "true") {
			return i + len("true"), nil
		}
		return scanLiteral(data, i, "true")
	case 'f':
		if hasLiteral(data, i, "false") {
			return i + len("false"), nil
		}
		return scanLiteral(data, i, "false")
	case 'n':
		if hasLiteral(data, i, "null") {
			return i + len("null"), nil
		}
		return scanLiteral(data, i, "null")
	default:
		if c == '-' || isDigit(c) {
			return scanNumber(data, i)
		}
		return i, errAt(data, i, "looking for beginning of value")
	}
}

// hasLiteral reports whether lit starts at data[i]; it inlines, so that a
// constant lit is compared in a load or two.
func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// scanContainer scans the object or array starting at data[i] iteratively: an
// explicit bit stack (1 = object) replaces recursion, so hostile nesting cannot
// exhaust the goroutine stack. c, when not nil, counts every value. It is
// one loop on purpose, longer than the house's 60 lines: opening and closing
// a container are its hot path, run once a value, with no call between.
//
//nolint:funlen // the scanner's per-value loop, kept whole (see above)
func scanContainer(data []byte, i, depth int, c *counter) (int, error) {
	var stack [MaxDepth / 64]uint64
	n := 0 // containers currently open in this call
	var err error
	for {
		// A value starts at data[i].
		if i >= len(data) {
			return i, errAt(data, i, "")
		}
		if c != nil {
			if err = c.node(i); err != nil {
				return i, err
			}
		}
		switch c := data[i]; c {
		case '{', '[':
			if depth+n >= MaxDepth {
				return i, errDepth(i)
			}
			isObject := c == '{'
			if isObject {
				stack[n>>6] |= 1 << (n & 63)
			} else {
				stack[n>>6] &^= 1 << (n & 63)
			}
			n++
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i++
				n--
				break // an empty container is a complete value
			}
			if isObject {
				if i, err = scanKey(data, i); err != nil {
					return i, err
				}
			}
			continue
		case '"':
			if i, _, err = scanString(data, i); err != nil {
				return i, err
			}
		default:
			if i, err = scanValue(data, i, depth+n); err != nil {
				return i, err
			}
		}
		// A value ended at i: close containers until one expects another value.
		for {
			if n == 0 {
				return i, nil
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return i, errAt(data, i, "")
			}
			c := data[i]
			if stack[(n-1)>>6]&(1<<((n-1)&63)) != 0 {
				if c == ',' {
					if i, err = scanKey(data, skipSpace(data, i+1)); err != nil {
						return i, err
					}
					break
				}
				if c != '}' {
					return i, errAt(data, i, "after object key:value pair")
				}
			} else {
				if c == ',' {
					i = skipSpace(data, i+1)
					break
				}
				if c != ']' {
					return i, errAt(data, i, "after array element")
				}
			}
			i++
			n--
		}
	}
}

// scanKey scans an object key at data[i], the colon and the whitespace after
// it; it returns the index of the member's value.
func scanKey(data []byte, i int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return i, errAt(data, i, "looking for beginning of object key string")
	}
	i, _, err := scanString(data, i)
	if err != nil {
		return i, err
	}
	if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
		return i, errAt(data, i, "after object key")
	}
	return skipSpace(data, i+1), nil
}

// Word-at-a-time constants: one in every byte, and the high bit of every byte.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// stringSpecial returns a non-zero word when one of the eight bytes of x
// (little endian) is '"', '\\', a control character below 0x20 or a byte of a
// multi-byte UTF-8 sequence (0x80 and up). Its lowest set bit is always in the
// first such byte; higher bits may be false positives caused by borrows,
// which never propagate downwards.
func stringSpecial(x uint64) uint64 {
	q := x ^ (lsbs * '"')
	b := x ^ (lsbs * '\\')
	// (v - 0x01..) &^ v & 0x80.. finds zero bytes of v; (x - 0x20..) &^ x finds
	// bytes below 0x20. x, q and b share their high bits, so one &^ x serves
	// all; | x then adds the bytes whose own high bit is set.
	return (((x-lsbs*0x20)|(q-lsbs)|(b-lsbs))&^x | x) & msbs
}

// indexSpecial returns the index of the first '"', '\\', control character or
// non-ASCII byte in data at or after i, or len(data).
func indexSpecial(data []byte, i int) int {
	for ; i+16 <= len(data); i += 16 {
		m := stringSpecial(binary.LittleEndian.Uint64(data[i : i+8]))
		if m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		if m = stringSpecial(binary.LittleEndian.Uint64(data[i+8 : i+16])); m != 0 {
			return i + 8 + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(data); i++ {
		if c := data[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// scanString scans the string starting with the quote at data[i] and returns
// the index just past its closing quote and whether it contains escapes. The
// string must be valid UTF-8.
func scanString(data []byte, i int) (end int, escaped bool, err error) {
	i++
	for {
		i = indexSpecial(data, i)
		if i >= len(data) {
			return i, escaped, errAt(data, i, "")
		}
		switch data[i] {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			if i, err = scanEscape(data, i); err != nil {
				return i, escaped, err
			}
		default:
			if data[i] < utf8.RuneSelf {
				return i, escaped, errAt(data, i, "in string literal")
			}
			if i, err = scanUTF8(data, i); err != nil {
				return i, escaped, err
			}
		}
	}
}

// scanUTF8 checks the run of multi-byte UTF-8 sequences starting at data[i]
// and returns the index of the first ASCII byte after it. Two- and
// three-byte sequences (Latin, Cyrillic, CJK, ...) take a fast path.
func scanUTF8(data []byte, i int) (int, error) {
	for i < len(data) {
		c := data[i]
		switch {
		case c < utf8.RuneSelf:
			return i, nil
		case c >= 0xc2 && c <= 0xdf && i+1 < len(data) && data[i+1]&0xc0 == 0x80:
			i += 2
		case (c >= 0xe1 && c <= 0xec || c == 0xee || c == 0xef) && i+2 < len(data) &&
			data[i+1]&0xc0 == 0x80 && data[i+2]&0xc0 == 0x80:
			i += 3 // E0, ED (overlong, surrogates) take the slow path
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return i, errUTF8(i)
			}
			i += size
		}
	}
	return i, nil
}

// scanEscape checks the escape sequence starting with the backslash at
// data[i] and returns the index just past it.
func scanEscape(data []byte, i int) (int, error) {
	i++
	if i >= len(data) {
		return i, errAt(data, i, "")
	}
	switch data[i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 1, nil
	case 'u':
		for j := i + 1; j < i+5; j++ {
			if j >= len(data) || !isHex(data[j]) {
				return j, errAt(data, j, `in \u hexadecimal character escape`)
			}
		}
		return i + 5, nil
	default:
		return i, errAt(data, i, "in string escape code")
	}
}

// scanNumber scans the number starting at data[i] per the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and returns the index just
// past it. What follows the number is the caller's to check.
func scanNumber(data []byte, i int) (int, error) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return i, errAt(data, i, "in numeric literal")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return i, errAt(data, i, "after decimal point in numeric literal")
		}
		i = skipDigits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return i, errAt(data, i, "in exponent of numeric literal")
		}
		i = skipDigits(data, i+1)
	}
	return i, nil
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

// scanLiteral checks that lit (true, false or null) starts at data[i].
func scanLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	for j := 1; j < len(lit); j++ {
		if i+j >= len(data) || data[i+j] != lit[j] {
			return i + j, errAt(data, i+j, "in literal "+lit+" (expecting "+quoteChar(lit[j])+")")
		}
	}
	return i + len(lit), nil // unreachable: the fast path matched
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
