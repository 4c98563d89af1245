package jsonbody

// Flag reads raw, the JSON value of a member, as the boolean vLLM reads: its
// request models are pydantic v2 models whose flags are Optional[bool] in
// lax mode, so besides true and false they take
//
//   - the numbers 0 and 1, in any spelling of those values (0.0, 1e0, -0),
//   - the strings "0" and "1", and "f", "n", "no", "off", "false", "t",
//     "y", "on", "yes", "true" in any ASCII letter case (escapes decoded,
//     no surrounding space),
//
// and null, which is None: false wherever vLLM reads a flag. It reports
// false for anything else, which pydantic refuses (a validation error).
// It does not allocate for an unescaped value.
func Flag(raw []byte) (value, ok bool) {
	if len(raw) == 0 {
		return false, false
	}
	switch raw[0] {
	case 't', 'f':
		return Bool(raw)
	case 'n':
		return false, IsNull(raw)
	case '"':
		return flagString(raw)
	}
	switch n, isInt := Int(raw); {
	case isInt && n == 0:
		return false, true
	case isInt && n == 1:
		return true, true
	}
	return false, false
}

// flagString reads the JSON string raw as pydantic's str-to-bool coercion.
func flagString(raw []byte) (value, ok bool) {
	end, escaped, err := scanString(raw, 0)
	if err != nil || end != len(raw) {
		return false, false
	}
	s := raw[1 : len(raw)-1]
	var buf [32]byte
	if escaped {
		if len(s) > 6*len("false") { // each character at most one \uXXXX
			return false, false
		}
		s = appendUnquoted(buf[:0], s)
	}
	if len(s) > len("false") {
		return false, false
	}
	var lower [5]byte
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower[:len(s)]) {
	case "0", "f", "n", "no", "off", "false":
		return false, true
	case "1", "t", "y", "on", "yes", "true":
		return true, true
	}
	return false, false
}
