package jsonbody

import (
	"strconv"
	"strings"
)

// Bounds of a path in an error message: a hostile document must not make
// its own error huge.
const (
	maxPathFrames = 32
	maxPathKey    = 64
)

// pathFrame is one open container on the way to an error.
type pathFrame struct {
	object  bool
	wantKey bool   // object: the next string is a key
	key     []byte // object: the current member's key, unescaped
	index   int    // array: the current element's index
}

// pathAt names the member or element of data that contains data[off] (see
// SyntaxError.Path). The bytes before off must be a prefix the scanner
// accepted, which holds for the offset of any error it reported.
func pathAt(data []byte, off int) string {
	var stack []pathFrame
	for i := 0; i < off && i < len(data); {
		switch c := data[i]; c {
		case '{', '[':
			stack = append(stack, pathFrame{object: c == '{', wantKey: c == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				top := &stack[n-1]
				top.index++
				top.wantKey, top.key = top.object, nil
			}
		case '"':
			end, escaped, err := scanString(data, i)
			if err != nil || end > off {
				return formatPath(stack)
			}
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				stack[n-1].key, stack[n-1].wantKey = keyName(data[i:end], escaped), false
			}
			i = end
			continue
		}
		i++
	}
	return formatPath(stack)
}

// formatPath writes the frames as keys joined by dots and indexes in
// brackets; a key that is not a plain identifier is quoted in brackets.
// An object whose first key has not been read yet ends the path.
func formatPath(stack []pathFrame) string {
	var b strings.Builder
	for n, f := range stack {
		if n == maxPathFrames {
			b.WriteString("...")
			break
		}
		if !f.object {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if f.key == nil {
			break
		}
		key := string(f.key)
		if len(key) > maxPathKey {
			key = key[:maxPathKey] + "..."
		}
		switch {
		case plainKey(key) && b.Len() > 0:
			b.WriteByte('.')
			b.WriteString(key)
		case plainKey(key):
			b.WriteString(key)
		default:
			b.WriteByte('[')
			b.Write(AppendString(nil, key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// plainKey reports a non-empty key of ASCII letters, digits, '_' and '-'.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
