package jsonbody

import "bytes"

// Object is a JSON object held as its ordered members. Each member keeps its
// original key text and raw value text; members a caller does not change are
// written back byte for byte by [Object.AppendTo].
//
// The zero value is an empty object. Lookups are linear in the number of
// members, which suits request bodies (tens of keys). An Object is not safe for
// concurrent use when any goroutine modifies it; concurrent reads are safe.
type Object struct {
	members []member
}

type member struct {
	key   []byte // key text as written, quotes and escapes included
	name  []byte // unescaped key; aliases key when the key has no escapes
	value []byte // raw value text without surrounding whitespace
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
func ParseObject(data []byte) (*Object, error) {
	o, err := parseObject(data)
	if err != nil {
		return nil, located(data, err)
	}
	return o, nil
}

func parseObject(data []byte) (*Object, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		if err := Valid(data); err != nil {
			return nil, err
		}
		return nil, ErrNotObject
	}
	o := &Object{members: make([]member, 0, 16)}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return o.end(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, errAt(data, i, "looking for beginning of object key string")
		}
		keyStart := i
		end, escaped, err := scanString(data, i)
		if err != nil {
			return nil, err
		}
		key := data[keyStart:end]
		if i = skipSpace(data, end); i >= len(data) || data[i] != ':' {
			return nil, errAt(data, i, "after object key")
		}
		valueStart := skipSpace(data, i+1)
		if i, err = scanValue(data, valueStart, 1); err != nil {
			return nil, err
		}
		o.members = append(o.members, member{key: key, name: keyName(key, escaped), value: data[valueStart:i]})

		if i = skipSpace(data, i); i >= len(data) {
			return nil, errAt(data, i, "")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return o.end(data, i+1)
		default:
			return nil, errAt(data, i, "after object key:value pair")
		}
	}
}

// end checks that only whitespace follows the object that ended at data[i].
func (o *Object) end(data []byte, i int) (*Object, error) {
	if err := expectEnd(data, i); err != nil {
		return nil, err
	}
	return o, nil
}

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
// input (or the slice given to Set) and must not be modified.
func (o *Object) Get(key string) ([]byte, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if string(o.members[i].name) == key {
			return o.members[i].value, true
		}
	}
	return nil, false
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
			m.value = raw
		}
		o.members[w] = m
		w++
	}
	clear(o.members[w:])
	o.members = o.members[:w]
	if !found {
		o.members = append(o.members, member{key: AppendString(nil, key), name: []byte(key), value: raw})
	}
}

// Delete removes every member named key; a missing key is not an error.
func (o *Object) Delete(key string) {
	w := 0
	for _, m := range o.members {
		if string(m.name) != key {
			o.members[w] = m
			w++
		}
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
// spelling and inner whitespace.
func (o *Object) AppendTo(dst []byte) []byte {
	dst = append(dst, '{')
	for i, m := range o.members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.key...)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}')
}

// Bytes returns the object's JSON text (see [Object.AppendTo]) in a new slice
// of exactly the right size.
func (o *Object) Bytes() []byte {
	n := 2
	for _, m := range o.members {
		n += len(m.key) + 1 + len(m.value) + 1
	}
	return o.AppendTo(make([]byte, 0, n))
}
