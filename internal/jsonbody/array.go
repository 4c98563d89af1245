package jsonbody

// ParseArray validates that data is one complete, valid JSON document whose
// top level is an array (same rules as [ParseObject]) and returns the raw text
// of its elements in order, without surrounding whitespace. Elements alias
// data. An empty array yields an empty, non-nil slice. Errors are a
// [*SyntaxError], an error wrapping [ErrTooDeep], or [ErrNotArray] when data
// is valid JSON of another kind.
func ParseArray(data []byte) ([][]byte, error) {
	elems := make([][]byte, 0, 8)
	err := EachElement(data, func(_ int, elem []byte) error {
		elems = append(elems, elem)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return elems, nil
}

// EachElement is [ParseArray] without the slice: it calls fn with each
// element's index and raw text in order, as it validates, and stops at
// fn's first error, which it returns as it came. Elements alias data. It
// keeps nothing, so a huge array costs no memory.
func EachElement(data []byte, fn func(index int, elem []byte) error) error {
	if err := eachElement(data, fn); err != nil {
		if ve, ok := err.(visitError); ok {
			return ve.err
		}
		return located(data, err)
	}
	return nil
}

// visitError carries fn's error out of eachElement unlocated.
type visitError struct{ err error }

func (e visitError) Error() string { return e.err.Error() }

func eachElement(data []byte, fn func(int, []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		if err := Valid(data); err != nil {
			return err
		}
		return ErrNotArray
	}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
		return expectEnd(data, i+1)
	}
	for index := 0; ; index++ {
		start := i
		var err error
		if i, err = scanValue(data, i, 1); err != nil {
			return err
		}
		if err := fn(index, data[start:i]); err != nil {
			return visitError{err}
		}
		if i = skipSpace(data, i); i >= len(data) {
			return errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return expectEnd(data, i+1)
		default:
			return errAt(data, i, "after array element")
		}
	}
}
