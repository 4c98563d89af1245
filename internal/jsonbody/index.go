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
	// the given Index (an empty Index indexes just that value).
	Members map[string]*Index
	// Elements indexes, in an array, every element with the given Index.
	Elements *Index
	// Uint32s reads an array as token IDs: it is counted and its elements
	// checked as it is validated (see [Uint32Stats]), and none is kept.
	Uint32s bool
	// Sparse keeps, of an array's elements, only those in which the index
	// finds something, and below it every object and array only when the
	// index finds something in it: a member that an empty Index names (of
	// any type), an element or member kept, a token-ID array. The others
	// stay raw text and cost nothing: the array's Len counts them,
	// [Array.Object] is nil for them and [Array.Indexed] skips them.
	Sparse bool
	// Count, when not 0, counts the elements of the arrays this Index
	// indexes against [Limits].Counts[Count-1].
	Count int
	// Strings, for a member an empty Index names, finds it (see Sparse)
	// only when it is a string, one of these; nil finds it as any value.
	Strings []string
}

// finds reports whether idx, a leaf, finds the scalar value raw.
func (idx *Index) finds(raw []byte) bool {
	if idx.Strings == nil {
		return true
	}
	s, ok := String(raw)
	return ok && slices.Contains(idx.Strings, s)
}

// leaf reports an index that asks for the value it names and nothing in it.
func (idx *Index) leaf() bool {
	return idx.Members == nil && idx.Elements == nil && !idx.Uint32s
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
	// sparse: elems holds the kept elements only, by pos, of n.
	sparse bool
	n      int
}

type element struct {
	value []byte
	obj   *Object
	arr   *Array
	pos   int // the element's index in its array
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
	return ParseIndexedLimits(data, idx, nil)
}

// ParseIndexedLimits is [ParseIndexed] within lim (nil: none) and, when lim
// is not nil, [MaxIndexed]: it counts what lim bounds as it validates and
// fails with a [*LimitError] at the first value past a limit, before
// keeping it.
func ParseIndexedLimits(data []byte, idx *Index, lim *Limits) (*Object, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		if err := Valid(data); err != nil {
			return nil, err
		}
		return nil, ErrNotObject
	}
	sc := scratches.Get().(*scratch)
	defer sc.put()
	sc.c.lim = lim
	o, end, _, err := parseObjectAt(sc, data, i, 0, idx, false)
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
	a, end, _, err := parseArrayAt(sc, data, i, 0, idx, false)
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
	c       counter
	// into, when set, is the Object the top-level object is parsed into
	// (ParseObjectInto).
	into *Object
}

var scratches = sync.Pool{New: func() any { return &scratch{} }}

// maxScratch bounds what a pooled scratch keeps (entries of each kind).
const maxScratch = 1 << 12

// put pools sc. It must not keep the document alive: a container that
// ended cleared what it left (pop); a parse that failed leaves the rest
// within the length, cleared here.
func (sc *scratch) put() {
	sc.c, sc.into = counter{}, nil
	if cap(sc.members) > maxScratch || cap(sc.elems) > maxScratch {
		return
	}
	clear(sc.members)
	clear(sc.elems)
	sc.members, sc.elems = sc.members[:0], sc.elems[:0]
	scratches.Put(sc)
}

// pending is the number of entries read so far of the open containers.
func (sc *scratch) pending() int { return len(sc.members) + len(sc.elems) }

// pop returns the entries of s from base on, in a slice of their number,
// and clears them out of s, which it cuts back to base.
func pop[T any](s *[]T, base int) []T {
	out := slices.Clone((*s)[base:])
	drop(s, base)
	return out
}

// drop clears the entries of s from base on and cuts s back to base.
func drop[T any](s *[]T, base int) {
	clear((*s)[base:])
	*s = (*s)[:base]
}

// scan validates, and counts, the value at data[i] without indexing it.
func (sc *scratch) scan(data []byte, i, depth int) (int, error) {
	if i < len(data) && (data[i] == '{' || data[i] == '[') {
		return scanContainer(data, i, depth, &sc.c)
	}
	if err := sc.c.node(i); err != nil {
		return i, err
	}
	return scanValue(data, i, depth)
}

// parseIndexedValue scans the value at data[i] inside a container at depth
// depth (0: the top level) and, when idx asks for it, indexes it; found
// reports that idx found something in it (see Index.Sparse). In a sparse
// region, a container is kept only when found.
func parseIndexedValue(sc *scratch, data []byte, i, depth int, idx *Index, sparse bool) (end int, obj *Object, arr *Array, found bool, err error) {
	if idx == nil || i >= len(data) {
		end, err = sc.scan(data, i, depth)
		return end, nil, nil, false, err
	}
	switch data[i] {
	case '{':
		obj, end, found, err = parseObjectAt(sc, data, i, depth, idx, sparse)
	case '[':
		arr, end, found, err = parseArrayAt(sc, data, i, depth, idx, sparse)
	default:
		end, err = sc.scan(data, i, depth)
		found = err == nil && idx.leaf() && idx.finds(data[i:end])
	}
	return end, obj, arr, found, err
}

// parseObjectAt parses the object that starts at data[i] inside a
// container at depth depth and returns it with the index just past it and
// whether idx found something in it; in a sparse region an object found
// empty-handed is not kept (nil).
func parseObjectAt(sc *scratch, data []byte, i, depth int, idx *Index, sparse bool) (*Object, int, bool, error) {
	if depth >= MaxDepth {
		return nil, i, false, errDepth(i)
	}
	if err := sc.c.node(i); err != nil {
		return nil, i, false, err
	}
	start, base := i, len(sc.members)
	found := idx != nil && idx.leaf() && idx.Strings == nil
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		if sparse && !found {
			return nil, i + 1, false, nil
		}
		return sc.object(depth, data[start:i+1], base), i + 1, found, nil
	}
	for {
		m, valueStart, end, err := parseKey(data, i)
		if err != nil {
			return nil, end, false, err
		}
		var child *Index
		if idx != nil {
			child = idx.Members[string(m.name)]
		}
		childFound := false
		if valueStart < len(data) && data[valueStart] == '"' {
			if err = sc.c.node(valueStart); err == nil {
				i, m.escaped, err = scanString(data, valueStart)
			}
			childFound = err == nil && child != nil && child.leaf() && child.finds(data[valueStart:i])
		} else {
			i, m.obj, m.arr, childFound, err = parseIndexedValue(sc, data, valueStart, depth+1, child, sparse)
		}
		if err == nil && sc.c.lim != nil {
			err = sc.c.indexed(sc.pending()+1, valueStart)
		}
		if err != nil {
			return nil, i, false, err
		}
		found = found || childFound
		m.value = data[valueStart:i]
		sc.members = append(sc.members, m)

		if i = skipSpace(data, i); i >= len(data) {
			return nil, i, false, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			if sparse && !found {
				drop(&sc.members, base)
				return nil, i + 1, false, nil
			}
			o := sc.object(depth, data[start:i+1], base)
			sc.c.kept += len(o.members)
			return o, i + 1, found, nil
		default:
			return nil, i, false, errAt(data, i, "after object key:value pair")
		}
	}
}

// object makes the object parsed at depth from raw, its members those of
// the scratch from base on: in a new Object, or at the top level in
// sc.into, whose memory it reuses.
func (sc *scratch) object(depth int, raw []byte, base int) *Object {
	if depth > 0 || sc.into == nil {
		return &Object{raw: raw, members: pop(&sc.members, base)}
	}
	o := sc.into
	clear(o.members)
	*o = Object{raw: raw, members: append(o.members[:0], sc.members[base:]...)}
	drop(&sc.members, base)
	return o
}

// ParseObjectInto is [ParseObject] into o, reusing the memory o holds:
// what o was is gone, and any [Object] or value read from it before must
// not be used after. A loop that parses many small objects one at a time
// allocates nothing for each. On error o is left empty.
func ParseObjectInto(o *Object, data []byte) error {
	i := skipSpace(data, 0)
	*o = Object{members: o.members[:0]}
	if i >= len(data) || data[i] != '{' {
		if err := Valid(data); err != nil {
			return err
		}
		return ErrNotObject
	}
	sc := scratches.Get().(*scratch)
	defer sc.put()
	sc.into = o
	_, end, _, err := parseObjectAt(sc, data, i, 0, nil, false)
	if err == nil {
		err = expectEnd(data, end)
	}
	if err != nil {
		*o = Object{members: o.members[:0]}
		return located(data, err)
	}
	return nil
}

// parseKey reads the key at data[i], and the colon after it, into a
// member; valueStart is where its value starts, end where an error is.
func parseKey(data []byte, i int) (m member, valueStart, end int, err error) {
	if i >= len(data) || data[i] != '"' {
		return m, 0, i, errAt(data, i, "looking for beginning of object key string")
	}
	keyStart := i
	end, escaped, err := scanString(data, i)
	if err != nil {
		return m, 0, end, err
	}
	key := data[keyStart:end]
	if i = skipSpace(data, end); i >= len(data) || data[i] != ':' {
		return m, 0, i, errAt(data, i, "after object key")
	}
	return member{key: key, name: keyName(key, escaped)}, skipSpace(data, i+1), i, nil
}

// parseArrayAt parses the array that starts at data[i] inside a container
// at depth depth, as idx says, and returns it as parseObjectAt does.
func parseArrayAt(sc *scratch, data []byte, i, depth int, idx *Index, sparse bool) (*Array, int, bool, error) {
	if depth >= MaxDepth {
		return nil, i, false, errDepth(i)
	}
	if err := sc.c.node(i); err != nil {
		return nil, i, false, err
	}
	if idx.Uint32s {
		a, end, err := parseUint32sAt(sc, data, i, depth)
		return a, end, err == nil, err
	}
	start, base := i, len(sc.elems)
	found := idx.leaf() && idx.Strings == nil
	if i = skipSpace(data, i+1); i < len(data) && data[i] == ']' {
		if sparse && !found {
			return nil, i + 1, false, nil
		}
		return &Array{raw: data[start : i+1], sparse: idx.Sparse}, i + 1, found, nil
	}
	for n := 0; ; n++ {
		e := element{pos: n}
		valueStart := i
		err := sc.c.element(idx.Count, i)
		var ef bool
		if err == nil {
			i, e.obj, e.arr, ef, err = parseIndexedValue(sc, data, i, depth+1, idx.Elements, sparse || idx.Sparse)
		}
		keep := !idx.Sparse || ef
		if err == nil && keep && sc.c.lim != nil {
			err = sc.c.indexed(sc.pending()+1, valueStart)
		}
		if err != nil {
			return nil, i, false, err
		}
		found = found || ef
		if keep {
			e.value = data[valueStart:i]
			sc.elems = append(sc.elems, e)
		}
		if i = skipSpace(data, i); i >= len(data) {
			return nil, i, false, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			if sparse && !found {
				drop(&sc.elems, base)
				return nil, i + 1, false, nil
			}
			a := &Array{raw: data[start : i+1], elems: pop(&sc.elems, base), sparse: idx.Sparse, n: n + 1}
			sc.c.kept += len(a.elems)
			return a, i + 1, found, nil
		default:
			return nil, i, false, errAt(data, i, "after array element")
		}
	}
}

// parseUint32sAt validates the array at data[i] and reads it as token IDs
// (Index.Uint32s) without keeping its elements.
func parseUint32sAt(sc *scratch, data []byte, i, depth int) (*Array, int, error) {
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
		if err := sc.c.node(i); err != nil {
			return nil, i, err
		}
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
