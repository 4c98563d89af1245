package jsonbody

import (
	"bytes"
	"slices"
	"unsafe"
)

// Object is a JSON object held as its ordered members. Each member keeps its
// original key text and raw value text; members a caller does not change are
// written back byte for byte by [Object.AppendTo].
//
// An Object from [ParseIndexed] also holds the members its [Index] names as
// nested Objects and Arrays, which are edited in place of their text (see
// [Object.EditObject]); an Object nobody edited is written back as the text
// it was parsed from by [Object.AppendSegments].
//
// The zero value is an empty object. Lookups are linear in the number of
// members, which suits request bodies (tens of keys). An Object is not safe for
// concurrent use when any goroutine modifies it; concurrent reads are safe.
type Object struct {
	members []member
	// raw is the text the object was parsed from; nil for one built by hand.
	raw []byte
	// edited is set by every change: raw no longer says what the object is.
	edited bool
}

type member struct {
	key   []byte // key text as written, quotes and escapes included
	name  []byte // unescaped key; aliases key when the key has no escapes
	value []byte // raw value text without surrounding whitespace
	// obj and arr hold the value indexed (ParseIndexed); at most one is set.
	obj *Object
	arr *Array
	// escaped: the value is a string with escape sequences.
	escaped bool
}

// ParseObject validates that data is one complete, valid JSON document whose
// top level is an object and indexes its members in document order. Validation
// covers the whole document at any depth, UTF-8 included (see [Valid]);
// surrounding whitespace is allowed.
//
// Keys and values alias data (nothing is copied): data must not be modified
// while the Object or any value from it is in use. Errors are a
// [*SyntaxError], an error wrapping [ErrTooDeep], or [ErrNotObject] when data
// is valid JSON of another kind (null included).
func ParseObject(data []byte) (*Object, error) { return ParseIndexed(data, nil) }

// keyName returns the unescaped form of a scanned key, decoded the way
// encoding/json decodes it (an unpaired surrogate escape becomes U+FFFD). It
// aliases key when no decoding is needed.
func keyName(key []byte, escaped bool) []byte {
	content := key[1 : len(key)-1]
	if !escaped {
		return content
	}
	return appendUnquoted(make([]byte, 0, len(content)), content)
}

// Len returns the number of members, duplicates included.
func (o *Object) Len() int { return len(o.members) }

// Get returns the raw JSON text of the value of key (unescaped key, exact
// match), without surrounding whitespace. When key appears more than once the
// last occurrence wins, as in encoding/json. The result aliases the parsed
// input (or the slice given to Set) and must not be modified; for a nested
// value that was edited (see [Object.EditObject]) it is the value's text as
// it now stands, in a new slice.
func (o *Object) Get(key string) ([]byte, bool) {
	m := o.find(key)
	if m == nil {
		return nil, false
	}
	return m.text(), true
}

// find returns the last member named key, or nil.
func (o *Object) find(key string) *member {
	for i := len(o.members) - 1; i >= 0; i-- {
		if string(o.members[i].name) == key {
			return &o.members[i]
		}
	}
	return nil
}

// text is the member's value as it now stands.
func (m *member) text() []byte {
	switch {
	case m.obj != nil && m.obj.rewritten():
		return m.obj.Bytes()
	case m.arr != nil && m.arr.edited:
		return m.arr.Bytes()
	}
	return m.value
}

// rewritten reports whether o is written member by member rather than as
// the text it was parsed from.
func (o *Object) rewritten() bool { return o.edited || o.raw == nil }

// String returns the value of key as a Go string when it is a JSON string
// (see [String]; the last occurrence of key wins). Unlike String it does not
// scan the value again, and when the string has no escape sequences the
// result aliases the parsed input instead of copying it: the input must
// then never be modified while the result is in use.
func (o *Object) String(key string) (string, bool) {
	m := o.find(key)
	if m == nil || len(m.value) < 2 || m.value[0] != '"' || m.obj != nil || m.arr != nil {
		return "", false
	}
	if m.escaped {
		return String(m.value)
	}
	content := m.value[1 : len(m.value)-1]
	if len(content) == 0 {
		return "", true
	}
	return unsafe.String(&content[0], len(content)), true
}

// Set makes raw the value of key. An existing member keeps its position and
// original key text; when key occurs several times the first occurrence takes
// raw and the others are removed. A new key is appended as the last member.
//
// raw must be one valid JSON value without surrounding whitespace (for
// example from [AppendString], [AppendUint32s], strconv, or another Object's
// Bytes); Set does not check it, and invalid raw yields an invalid body. The
// Object retains raw: the caller must not modify it afterwards.
func (o *Object) Set(key string, raw []byte) {
	found := false
	w := 0
	for _, m := range o.members {
		if string(m.name) == key {
			if found {
				continue
			}
			found = true
			m.value, m.obj, m.arr, m.escaped = raw, nil, nil, false
		}
		o.members[w] = m
		w++
	}
	clear(o.members[w:])
	o.members = o.members[:w]
	if !found {
		o.members = append(o.members, member{key: AppendString(nil, key), name: []byte(key), value: raw})
	}
	o.edited = true
}

// SetObject makes child the value of key, as Set does with its text: the
// Object then holds child, and writes it as child stands when written.
func (o *Object) SetObject(key string, child *Object) {
	o.Set(key, child.raw)
	o.find(key).obj = child
}

// Delete removes every member named key; a missing key is not an error
// (and no change).
func (o *Object) Delete(key string) {
	w := 0
	for _, m := range o.members {
		if string(m.name) != key {
			o.members[w] = m
			w++
		}
	}
	if w < len(o.members) {
		o.edited = true
	}
	clear(o.members[w:])
	o.members = o.members[:w]
}

// Keys returns the unescaped member names in document order, duplicates
// included. The slice and strings are fresh copies.
func (o *Object) Keys() []string {
	keys := make([]string, len(o.members))
	for i, m := range o.members {
		keys[i] = string(m.name)
	}
	return keys
}

// DuplicateKey reports a key that occurs more than once: of all repeated
// keys, the one whose second occurrence comes first in document order.
func (o *Object) DuplicateKey() (string, bool) {
	ms := o.members
	if len(ms) <= 32 {
		for j := 1; j < len(ms); j++ {
			for i := range j {
				if bytes.Equal(ms[i].name, ms[j].name) {
					return string(ms[j].name), true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		if _, ok := seen[string(m.name)]; ok {
			return string(m.name), true
		}
		seen[string(m.name)] = struct{}{}
	}
	return "", false
}

// AppendTo appends the object's JSON text to dst and returns the extended
// slice. Members appear in order as `key:value` separated by commas with no
// added whitespace; each key and value is copied byte for byte as parsed (or
// as given to Set), so unchanged members keep their original escapes, number
// spelling and inner whitespace. A nested value that was edited is written
// the same way, at its own level.
func (o *Object) AppendTo(dst []byte) []byte {
	dst = append(dst, '{')
	for i := range o.members {
		m := &o.members[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.key...)
		dst = append(dst, ':')
		switch {
		case m.obj != nil && m.obj.rewritten():
			dst = m.obj.AppendTo(dst)
		case m.arr != nil && m.arr.edited:
			dst = m.arr.AppendTo(dst)
		default:
			dst = append(dst, m.value...)
		}
	}
	return append(dst, '}')
}

// Bytes returns the object's JSON text (see [Object.AppendTo]) in a new slice
// of exactly the right size when nothing nested was edited.
func (o *Object) Bytes() []byte {
	n := 2
	for _, m := range o.members {
		n += len(m.key) + 1 + len(m.value) + 1
	}
	return o.AppendTo(make([]byte, 0, n))
}

// Edited reports whether the object changed since it was parsed: a Set, a
// Delete that removed a member, or an edit of a nested value through
// [Object.EditObject] or [Object.EditArray]. An object built by hand (the
// zero value) reports false until changed.
func (o *Object) Edited() bool { return o.edited }

// Clone returns a copy of o to edit without changing o: its members are its
// own, and its nested values are shared with o until edited through
// [Object.EditObject] or [Object.EditArray], which copy them first.
func (o *Object) Clone() *Object {
	return &Object{members: slices.Clone(o.members), raw: o.raw, edited: o.edited}
}

// Object returns the value of key as an indexed Object (see [ParseIndexed];
// the last occurrence of key wins), or nil when it was not indexed or is
// not an object. Read it only: edit it through [Object.EditObject].
func (o *Object) Object(key string) *Object {
	if m := o.find(key); m != nil {
		return m.obj
	}
	return nil
}

// Array returns the value of key as an indexed Array, or nil (see
// [Object.Object]).
func (o *Object) Array(key string) *Array {
	if m := o.find(key); m != nil {
		return m.arr
	}
	return nil
}

// EditObject returns the indexed Object value of key (the last occurrence)
// for editing: a clone of it, put in its place, so nothing else holding
// the old one sees the edits. It is nil when there is none, as for
// [Object.Object]. o counts as edited from then on.
func (o *Object) EditObject(key string) *Object {
	m := o.find(key)
	if m == nil || m.obj == nil {
		return nil
	}
	m.obj = m.obj.Clone()
	o.edited = true
	return m.obj
}

// EditArray is [Object.EditObject] for an indexed Array value.
func (o *Object) EditArray(key string) *Array {
	m := o.find(key)
	if m == nil || m.arr == nil {
		return nil
	}
	m.arr = m.arr.Clone()
	o.edited = true
	return m.arr
}

// Touch marks o edited, so it is written member by member (see
// [Object.AppendSegments]) as if it had changed.
func (o *Object) Touch() { o.edited = true }
