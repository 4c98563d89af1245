package jsonbody

import (
	"math"
	"slices"
	"sync"
)

// Index names the parts of a document that [ParseIndexed] keeps as nested
// Objects and Arrays while it validates the document, so that reading and
// editing them later costs no second scan. Everything else is validated and
// kept as raw text. Indexes are built once (package variables) and shared;
// they must not change while in use.
type Index struct {
	// Members indexes, in an object, the value of each named member with
	// the given Index (an empty Index indexes just that object or array).
	Members map[string]*Index
	// Elements indexes, in an array, every element with the given Index.
	Elements *Index
	// Uint32s reads an array as token IDs: it is counted and its elements
	// checked as it is validated (see [Uint32Stats]), and none is kept.
	Uint32s bool
}

// Array is a JSON array indexed by [ParseIndexed]: the raw text of each
// element, and the elements its Index names as nested Objects and Arrays.
// Like [Object], it is written back as the text it was parsed from until it
// is edited. Not safe for concurrent use when any goroutine modifies it.
type Array struct {
	elems  []element
	raw    []byte
	edited bool
	// uint32s is set, and elems empty, for an array indexed with Uint32s.
	uint32s *Uint32Stats
}

type element struct {
	value []byte
	obj   *Object
	arr   *Array
}

// Uint32Stats is what [ParseIndexed] learned of an array indexed with
// Uint32s as it validated it, without keeping its elements.
type Uint32Stats struct {
	// Len is the number of elements.
	Len int
	// Bad is the index of the first element that is not an integer in
	// [0, 2^32) (any spelling [Int] accepts is an integer), or -1.
	Bad int
	// First is the first byte of the first element; 0 for an empty array.
	First byte
	// Canonical reports that the array is written exactly as
	// [AppendUint32s] writes its elements: no whitespace, plain decimal
	// digits without leading zeros.
	Canonical bool
}

// ParseIndexed is [ParseObject] that also keeps the parts idx names as
// nested Objects and Arrays (read them with [Object.Object] and
// [Object.Array]), in the same single pass that validates the document. A
// nil idx indexes the top-level members only, as ParseObject does. Errors
// are ParseObject's, at the same offsets.
func ParseIndexed(data []byte, idx *Index) (*Object, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		if err := Valid(data); err != nil {
			return nil, err
		}
		return nil, ErrNotObject
	}
	sc := scratches.Get().(*scratch)
	defer sc.put()
	o, end, err := parseObjectAt(sc, data, i, 0, idx)
	if err == nil {
		err = expectEnd(data, end)
	}
	if err != nil {
		return nil, located(data, err)
	}
	return o, nil
}

// ParseArrayIndexed is [ParseIndexed] for a document whose top level is an
// array; idx indexes the array itself (its Elements, or Uint32s). Errors are
// [ParseArray]'s.
func ParseArrayIndexed(data []byte, idx *Index) (*Array, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		if err := Valid(data); err != nil {
			return nil, err
		}
		return nil, ErrNotArray
	}
	if idx == nil {
		idx = &Index{}
	}
	sc := scratches.Get().(*scratch)
	defer sc.put()
	a, end, err := parseArrayAt(sc, data, i, 0, idx)
	if err == nil {
		err = expectEnd(data, end)
	}
	if err != nil {
		return nil, located(data, err)
	}
	return a, nil
}

// scratch holds the members and elements read so far of the containers a
// parse is in, innermost last. A container's go there as they are read, and
// into the container, in a slice of their exact number, when it ends: a
// document keeps no spare capacity (a growing slice has up to twice what
// it holds).
type scratch struct {
	members []member
	elems   []element
}

var scratches = sync.Pool{New: func() any { return &scratch{} }}

// maxScratch bounds what a pooled scratch keeps (entries of each kind).
const maxScratch = 1 << 12

// put pools sc. It must not keep the document alive: a container that
// ended cleared what it left (pop); a parse that failed leaves the rest
// within the length, cleared here.
func (sc *scratch) put() {
	if cap(sc.members) > maxScratch || cap(sc.elems) > maxScratch {
		return
	}
	clear(sc.members)
	clear(sc.elems)
	sc.members, sc.elems = sc.members[:0], sc.elems[:0]
	scratches.Put(sc)
}

// pop returns the entries of s from base on, in a slice of their number,
// and clears them out of s, which it cuts back to base.
func pop[T any](s *[]T, base int) []T {
	out := slices.Clone((*s)[base:])
	clear((*s)[base:])
	*s = (*s)[:base]
	return out
}

// parseIndexedValue scans the value at data[i] inside a container at depth
// depth (0: the top level) and, when idx asks for it, indexes it.
func parseIndexedValue(sc *scratch, data []byte, i, depth int, idx *Index) (end int, obj *Object, arr *Array, err error) {
	if idx == nil || i >= len(data) {
		end, err = scanValue(data, i, depth)
		return end, nil, nil, err
	}
	switch data[i] {
	case '{':
		obj, end, err = parseObjectAt(sc, data, i, depth, idx)
	case '[':
		arr, end, err = parseArrayAt(sc, data, i, depth, idx)
	default:
		end, err = scanValue(data, i, depth)
	}
	return end, obj, arr, err
}

// parseObjectAt parses the object that starts at data[i] inside a
// container at depth depth and returns it with the index just past it.
func parseObjectAt(sc *scratch, data []byte, i, depth int, idx *Index) (*Object, int, error) {
	if depth >= MaxDepth {
		return nil, i, errDepth(i)
	}
	start, base := i, len(sc.members)
	o := &Object{}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		o.raw = data[start : i+1]
		return o, i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, i, errAt(data, i, "looking for beginning of object key string")
		}
		keyStart := i
		end, escaped, err := scanString(data, i)
		if err != nil {
			return nil, end, err
		}
		key := data[keyStart:end]
		if i = skipSpace(data, end); i >= len(data) || data[i] != ':' {
			return nil, i, errAt(data, i, "after object key")
		}
		m := member{key: key, name: keyName(key, escaped)}
		valueStart := skipSpace(data, i+1)
		var child *Index
		if idx != nil {
			child = idx.Members[string(m.name)]
		}
		if valueStart < len(data) && data[valueStart] == '"' {
			i, m.escaped, err = scanString(data, valueStart)
		} else {
			i, m.obj, m.arr, err = parseIndexedValue(sc, data, valueStart, depth+1, child)
		}
		if err != nil {
			return nil, i, err
		}
		m.value = data[valueStart:i]
		sc.members = append(sc.members, m)

		if i = skipSpace(data, i); i >= len(data) {
			return nil, i, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			o.raw = data[start : i+1]
			o.members = pop(&sc.members, base)
			return o, i + 1, nil
		default:
			return nil, i, errAt(data, i, "after object key:value pair")
		}
	}
}

// parseArrayAt parses the array that starts at data[i] inside a container
// at depth depth, as idx says, and returns it with the index just past it.
func parseArrayAt(sc *scratch, data []byte, i, depth int, idx *Index) (*Array, int, error) {
	if depth >= MaxDepth {
		return nil, i, errDepth(i)
	}
	if idx.Uint32s {
		return parseUint32sAt(data, i, depth)
	}
	start, base := i, len(sc.elems)
	a := &Array{}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
		a.raw = data[start : i+1]
		return a, i + 1, nil
	}
	for {
		e := element{}
		valueStart := i
		var err error
		if i, e.obj, e.arr, err = parseIndexedValue(sc, data, i, depth+1, idx.Elements); err != nil {
			return nil, i, err
		}
		e.value = data[valueStart:i]
		sc.elems = append(sc.elems, e)
		if i = skipSpace(data, i); i >= len(data) {
			return nil, i, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			a.raw = data[start : i+1]
			a.elems = pop(&sc.elems, base)
			return a, i + 1, nil
		default:
			return nil, i, errAt(data, i, "after array element")
		}
	}
}

// parseUint32sAt validates the array at data[i] and reads it as token IDs
// (Index.Uint32s) without keeping its elements.
func parseUint32sAt(data []byte, i, depth int) (*Array, int, error) {
	start := i
	st := &Uint32Stats{Bad: -1, Canonical: true}
	i++
	if i < len(data) && isSpace(data[i]) {
		st.Canonical = false
		i = skipSpace(data, i)
	}
	if i < len(data) && data[i] == ']' {
		return &Array{raw: data[start : i+1], uint32s: st}, i + 1, nil
	}
	if i < len(data) {
		st.First = data[i]
	}
	for index := 0; ; index++ {
		// Fast path: up to ten plain digits, no leading zero, then a
		// delimiter; only ten digits can exceed 2^32-1.
		n := digitRun(data, i, 11)
		j := i + n
		if n > 0 && n <= 10 && (data[i] != '0' || n == 1) && j < len(data) &&
			(data[j] == ',' || data[j] == ']' || isSpace(data[j])) &&
			(n < 10 || digitsValue(data, i, n) <= math.MaxUint32) {
			i = j
		} else {
			end, err := scanValue(data, i, depth+1)
			if err != nil {
				return nil, end, err
			}
			st.Canonical = false
			if n, ok := Int(data[i:end]); (!ok || n < 0 || n > math.MaxUint32) && st.Bad < 0 {
				st.Bad = index
			}
			i = end
		}
		st.Len++
		if i < len(data) && isSpace(data[i]) {
			st.Canonical = false
			i = skipSpace(data, i)
		}
		if i >= len(data) {
			return nil, i, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i++
			if i < len(data) && isSpace(data[i]) {
				st.Canonical = false
				i = skipSpace(data, i)
			}
		case ']':
			return &Array{raw: data[start : i+1], uint32s: st}, i + 1, nil
		default:
			return nil, i, errAt(data, i, "after array element")
		}
	}
}

// Len returns the number of elements (Uint32Stats.Len for an array indexed
// with Uint32s).
func (a *Array) Len() int {
	if a.uint32s != nil {
		return a.uint32s.Len
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

// Elem returns the raw text of element i as parsed (or as given to
// [Array.Set]); it panics when i is out of range, or for an array indexed
// with Uint32s, which keeps none.
func (a *Array) Elem(i int) []byte { return a.elems[i].value }

// Object returns element i as an indexed Object, or nil (see
// [Object.Object]).
func (a *Array) Object(i int) *Object { return a.elems[i].obj }

// Array returns element i as an indexed Array, or nil.
func (a *Array) Array(i int) *Array { return a.elems[i].arr }

// Set makes raw element i (see [Object.Set] for what raw must be).
func (a *Array) Set(i int, raw []byte) {
	a.elems[i] = element{value: raw}
	a.edited = true
}

// EditObject returns indexed Object element i for editing (see
// [Object.EditObject]); nil when it is not one.
func (a *Array) EditObject(i int) *Object {
	e := &a.elems[i]
	if e.obj == nil {
		return nil
	}
	e.obj = e.obj.Clone()
	a.edited = true
	return e.obj
}

// Clone returns a copy of a to edit without changing a (see
// [Object.Clone]).
func (a *Array) Clone() *Array {
	return &Array{elems: slices.Clone(a.elems), raw: a.raw, edited: a.edited, uint32s: a.uint32s}
}

// Edited reports whether the array changed since it was parsed.
func (a *Array) Edited() bool { return a.edited }

// AppendTo appends the array's JSON text: its raw text when not edited,
// else its elements (edited ones as they now stand) separated by commas.
func (a *Array) AppendTo(dst []byte) []byte {
	if !a.edited {
		return append(dst, a.raw...)
	}
	dst = append(dst, '[')
	for i := range a.elems {
		e := &a.elems[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		switch {
		case e.obj != nil && e.obj.rewritten():
			dst = e.obj.AppendTo(dst)
		case e.arr != nil && e.arr.edited:
			dst = e.arr.AppendTo(dst)
		default:
			dst = append(dst, e.value...)
		}
	}
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
