package jsonbody

// ParseArray validates that data is one complete, valid JSON document whose
// top level is an array (same rules as [ParseObject]) and returns the raw text
// of its elements in order, without surrounding whitespace. Elements alias
// data. An empty array yields an empty, non-nil slice. Errors are a
// [*SyntaxError], an error wrapping [ErrTooDeep], or [ErrNotArray] when data
// is valid JSON of another kind.
func ParseArray(data []byte) ([][]byte, error) {
	elems, err := parseArray(data)
	if err != nil {
		return nil, located(data, err)
	}
	return elems, nil
}

func parseArray(data []byte) ([][]byte, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		if err := Valid(data); err != nil {
			return nil, err
		}
		return nil, ErrNotArray
	}
	elems := make([][]byte, 0, 8)
	if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
		if err := expectEnd(data, i+1); err != nil {
			return nil, err
		}
		return elems, nil
	}
	for {
		start := i
		var err error
		if i, err = scanValue(data, i, 1); err != nil {
			return nil, err
		}
		elems = append(elems, data[start:i])
		if i = skipSpace(data, i); i >= len(data) {
			return nil, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			if err := expectEnd(data, i+1); err != nil {
				return nil, err
			}
			return elems, nil
		default:
			return nil, errAt(data, i, "after array element")
		}
	}
}
