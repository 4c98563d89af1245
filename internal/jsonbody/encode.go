package jsonbody

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendUint32s appends ids as a JSON array of decimal integers ("[1,2,3]",
// no spaces; "[]" for none) and returns the extended slice.
func AppendUint32s(dst []byte, ids []uint32) []byte {
	dst = slices.Grow(dst, 2+len(ids)*11)
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(id), 10)
	}
	return append(dst, ']')
}

// AppendString appends s as a quoted JSON string and returns the extended
// slice. The escaping is encoding/json's with HTML escaping off
// (json.Encoder.SetEscapeHTML(false)): '"' and '\\' are backslash-escaped,
// control characters use \b \f \n \r \t or \u00XX, U+2028 and U+2029 become
// \u2028 and \u2029, each byte of invalid UTF-8 becomes \ufffd, and
// everything else, '<', '>' and '&' included, is copied as is.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
