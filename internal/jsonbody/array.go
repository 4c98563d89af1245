package jsonbody

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
)

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

// Len returns the number of elements (Uint32Stats.Len for an array indexed
// with Uint32s; every element, kept or not, of a sparse one).
func (a *Array) Len() int {
	switch {
	case a.uint32s != nil:
		return a.uint32s.Len
	case a.sparse:
		return a.n
	}
	return len(a.elems)
}

// Uint32Stats returns what was learned of an array indexed with Uint32s;
// false for another array.
func (a *Array) Uint32Stats() (Uint32Stats, bool) {
	if a.uint32s == nil {
		return Uint32Stats{}, false
	}
	return *a.uint32s, true
}

// at is element i as kept, or nil for one a sparse array did not keep; it
// panics when i is out of range.
func (a *Array) at(i int) *element {
	if !a.sparse {
		return &a.elems[i]
	}
	if i < 0 || i >= a.n {
		panic(fmt.Sprintf("jsonbody: index %d out of range [0:%d]", i, a.n))
	}
	k, ok := slices.BinarySearchFunc(a.elems, i, func(e element, i int) int { return cmp.Compare(e.pos, i) })
	if !ok {
		return nil
	}
	return &a.elems[k]
}

// Elem returns the raw text of element i as parsed (or as given to
// [Array.Set]); it panics when i is out of range, or for an array indexed
// with Uint32s, which keeps none. For an element a sparse array did not
// keep it scans the array's text up to it.
func (a *Array) Elem(i int) []byte {
	if e := a.at(i); e != nil {
		return e.value
	}
	var text []byte
	_ = EachElement(a.raw, func(j int, elem []byte) error {
		if j < i {
			return nil
		}
		text = elem
		return errStop
	})
	return text
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// Object returns element i as an indexed Object, or nil (see
// [Object.Object]).
func (a *Array) Object(i int) *Object {
	if e := a.at(i); e != nil {
		return e.obj
	}
	return nil
}

// Array returns element i as an indexed Array, or nil.
func (a *Array) Array(i int) *Array {
	if e := a.at(i); e != nil {
		return e.arr
	}
	return nil
}

// Indexed yields in order the index of each element held as an Object or
// an Array: of a sparse array, those it kept.
func (a *Array) Indexed() iter.Seq[int] {
	return func(yield func(int) bool) {
		for k := range a.elems {
			if e := &a.elems[k]; (e.obj != nil || e.arr != nil) && !yield(e.pos) {
				return
			}
		}
	}
}

// Set makes raw element i (see [Object.Set] for what raw must be).
func (a *Array) Set(i int, raw []byte) {
	if e := a.at(i); e != nil {
		*e = element{value: raw, pos: i}
	} else {
		k, _ := slices.BinarySearchFunc(a.elems, i, func(e element, i int) int { return cmp.Compare(e.pos, i) })
		a.elems = slices.Insert(a.elems, k, element{value: raw, pos: i})
	}
	a.edited = true
}

// EditObject returns indexed Object element i for editing (see
// [Object.EditObject]); nil when it is not one.
func (a *Array) EditObject(i int) *Object {
	e := a.at(i)
	if e == nil || e.obj == nil {
		return nil
	}
	e.obj = e.obj.Clone()
	a.edited = true
	return e.obj
}

// Clone returns a copy of a to edit without changing a (see
// [Object.Clone]).
func (a *Array) Clone() *Array {
	c := *a
	c.elems = slices.Clone(a.elems)
	return &c
}

// Edited reports whether the array changed since it was parsed.
func (a *Array) Edited() bool { return a.edited }

// each calls fn with each element in order: its text and, when kept, the
// element (nil for one a sparse array did not keep, whose text is the
// array's as parsed).
func (a *Array) each(fn func(i int, text []byte, e *element)) {
	if !a.sparse {
		for i := range a.elems {
			fn(i, a.elems[i].value, &a.elems[i])
		}
		return
	}
	k := 0
	_ = EachElement(a.raw, func(i int, text []byte) error {
		if k < len(a.elems) && a.elems[k].pos == i {
			fn(i, a.elems[k].value, &a.elems[k])
			k++
		} else {
			fn(i, text, nil)
		}
		return nil
	})
}

// AppendTo appends the array's JSON text: its raw text when not edited,
// else its elements (edited ones as they now stand) separated by commas.
func (a *Array) AppendTo(dst []byte) []byte {
	if !a.edited {
		return append(dst, a.raw...)
	}
	dst = append(dst, '[')
	a.each(func(i int, text []byte, e *element) {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch {
		case e == nil:
			dst = append(dst, text...)
		case e.obj != nil && e.obj.rewritten():
			dst = e.obj.AppendTo(dst)
		case e.arr != nil && e.arr.edited:
			dst = e.arr.AppendTo(dst)
		default:
			dst = append(dst, e.value...)
		}
	})
	return append(dst, ']')
}

// Raw returns the array's JSON text: as parsed (aliasing the input) when
// not edited, else written anew (see [Array.AppendTo]).
func (a *Array) Raw() []byte {
	if !a.edited {
		return a.raw
	}
	return a.Bytes()
}

// Bytes returns the array's JSON text (see [Array.AppendTo]) in a new slice.
func (a *Array) Bytes() []byte { return a.AppendTo(nil) }
