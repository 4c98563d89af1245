package jsonbody

import (
	"bytes"
	"fmt"
	"math"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// String returns the value of the JSON string raw, unescaped exactly as
// encoding/json decodes it (an unpaired surrogate escape becomes U+FFFD). It
// reports false when raw is not exactly one valid JSON string (invalid UTF-8
// and surrounding whitespace included). The result never aliases raw; it
// costs one allocation (none for the empty string).
func String(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	end, escaped, err := scanString(raw, 0)
	if err != nil || end != len(raw) {
		return "", false
	}
	content := raw[1 : len(raw)-1]
	if !escaped {
		return string(content), true
	}
	b := appendUnquoted(make([]byte, 0, len(content)), content)
	if len(b) == 0 {
		return "", true
	}
	// b is fresh and never written again, so it can back the string (as in
	// strings.Builder) instead of being copied.
	return unsafe.String(&b[0], len(b)), true
}

// appendUnquoted appends the decoded form of content, the text between the
// quotes of a string that scanString accepted, following encoding/json.
func appendUnquoted(dst, content []byte) []byte {
	for len(content) > 0 {
		n := bytes.IndexByte(content, '\\')
		if n < 0 {
			n = len(content)
		}
		dst = append(dst, content[:n]...)
		if content = content[n:]; len(content) == 0 {
			break
		}
		// content starts with a backslash that scanEscape validated.
		switch c := content[1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(content[2:6])
			content = content[6:]
			if utf16.IsSurrogate(r) {
				if len(content) >= 6 && content[0] == '\\' && content[1] == 'u' {
					if d := utf16.DecodeRune(r, hex4(content[2:6])); d != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, d)
						content = content[6:]
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		content = content[2:]
	}
	return dst
}

// hex4 decodes four hexadecimal digits that scanEscape validated.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Bool returns the value of the JSON literal true or false; it reports false
// for anything else.
func Bool(raw []byte) (value, ok bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// IsNull reports whether raw is the JSON literal null.
func IsNull(raw []byte) bool { return string(raw) == "null" }

// Int returns the value of a JSON number that is an exact integer within
// int64 range, whatever its spelling: 3, 3.0, 3e0, 0.3e1 and 300e-2 are all
// 3, and -0 is 0. It reports false for fractions (3.5), values out of range,
// and anything that is not exactly one JSON number (surrounding whitespace
// included). It does not allocate.
func Int(raw []byte) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	end, err := scanNumber(raw, 0)
	if err != nil || end != len(raw) {
		return 0, false
	}
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	if len(raw) <= 18 && isDigits(raw) { // fast path: fewer than 19 plain digits
		var u int64
		for _, c := range raw {
			u = u*10 + int64(c-'0')
		}
		if neg {
			u = -u
		}
		return u, true
	}
	return intOf(raw, neg)
}

// intOf is Int past its fast path: raw (without its sign) as digits, a
// fraction and an exponent, an exact integer within int64 range or false.
func intOf(raw []byte, neg bool) (int64, bool) {
	mantissa, exp := raw, int64(0)
	if e := bytes.IndexAny(raw, "eE"); e >= 0 {
		mantissa = raw[:e]
		exp = parseExponent(raw[e+1:])
	}
	// value = digits(mantissa) * 10^(exp - fracLen)
	if dot := bytes.IndexByte(mantissa, '.'); dot >= 0 {
		exp -= int64(len(mantissa) - dot - 1)
	}
	lo, hi := 0, len(mantissa)
	for lo < hi && (mantissa[lo] == '0' || mantissa[lo] == '.') {
		lo++
	}
	if lo == hi {
		return 0, true // zero, whatever the exponent
	}
	for mantissa[hi-1] == '0' || mantissa[hi-1] == '.' {
		if mantissa[hi-1] == '0' {
			exp++
		}
		hi--
	}
	sig := mantissa[lo:hi]
	digits := int64(len(sig))
	if bytes.IndexByte(sig, '.') >= 0 {
		digits--
	}
	if exp < 0 || digits+exp > 19 {
		return 0, false // a fraction, or at least 10^19
	}
	var u uint64 // < 10^19 < 2^64
	for _, c := range sig {
		if c != '.' {
			u = u*10 + uint64(c-'0')
		}
	}
	for range exp {
		u *= 10
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= -math.MinInt64:
		return -int64(u), true // wraps correctly for MinInt64
	}
	return 0, false
}

func isDigits(s []byte) bool {
	for _, c := range s {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// parseExponent parses an exponent ([+-]?digits, grammar already checked),
// saturating far beyond any value that matters.
func parseExponent(e []byte) int64 {
	neg := e[0] == '-'
	if e[0] == '+' || neg {
		e = e[1:]
	}
	var v int64
	for _, c := range e {
		if v < 1<<40 {
			v = v*10 + int64(c-'0')
		}
	}
	if neg {
		return -v
	}
	return v
}

// Uint32s returns the elements of a JSON array of integers in [0, 2^32), such
// as token IDs. Elements may use any integral spelling [Int] accepts. When an
// element is valid JSON of another kind, the error names its zero-based index
// ("index 3: not a non-negative 32-bit integer"); malformed JSON gives a
// [*SyntaxError], and a valid non-array [ErrNotArray]. An empty array yields
// an empty, non-nil slice. Whitespace around and inside raw is allowed.
func Uint32s(raw []byte) ([]uint32, error) {
	ids, err := uint32s(raw)
	if err != nil {
		return nil, located(raw, err)
	}
	return ids, nil
}

func uint32s(raw []byte) ([]uint32, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		if err := Valid(raw); err != nil {
			return nil, err
		}
		return nil, ErrNotArray
	}
	// One ID takes at least two bytes of raw, which bounds the guess when
	// the commas are inside strings.
	ids := make([]uint32, 0, min(bytes.Count(raw, []byte{','})+1, len(raw)/2))
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		if err := expectEnd(raw, i+1); err != nil {
			return nil, err
		}
		return ids, nil
	}
	for index := 0; ; index++ {
		if v, j, ok := plainUint32(raw, i); ok {
			ids = append(ids, v)
			i = j
		} else {
			end, err := scanValue(raw, i, 1)
			if err != nil {
				return nil, err
			}
			n, ok := Int(raw[i:end])
			if !ok || n < 0 || n > math.MaxUint32 {
				return nil, fmt.Errorf("index %d: not a non-negative 32-bit integer", index)
			}
			ids = append(ids, uint32(n))
			i = end
		}
		if i = skipSpace(raw, i); i >= len(raw) {
			return nil, errAt(raw, i, "")
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			if err := expectEnd(raw, i+1); err != nil {
				return nil, err
			}
			return ids, nil
		default:
			return nil, errAt(raw, i, "after array element")
		}
	}
}

// plainUint32 is the fast path of token IDs: the plain decimal integer at
// raw[i] (up to ten digits, no leading zero, at most 2^32-1) followed by
// a delimiter, with the index just past it; false for anything else.
func plainUint32(raw []byte, i int) (v uint32, end int, ok bool) {
	n := digitRun(raw, i, 11)
	end = i + n
	if n == 0 || n > 10 || raw[i] == '0' && n > 1 || end >= len(raw) ||
		raw[end] != ',' && raw[end] != ']' && !isSpace(raw[end]) {
		return 0, i, false
	}
	u := digitsValue(raw, i, n)
	if u > math.MaxUint32 {
		return 0, i, false
	}
	return uint32(u), end, true
}
