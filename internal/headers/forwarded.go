// Package headers is the coordinator's header policy: which client headers
// reach the legs, from REST and from gRPC call metadata, which call metadata
// reaches REST clients, and what is never relayed. policy.go holds every
// rule; Forwarded is the typed set of client headers a request carries to
// its legs; request_id.go and leg_request_id.go the x-request-id a client
// and each leg get.
package headers

import (
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Forwarded holds the client headers every leg of one request carries:
// names lowercased once, as they go on the wire, one value each. The zero
// value is empty and ready to use. Methods take names in any case.
//
// Copying a Forwarded shares its values: Clone before editing a copy.
type Forwarded struct {
	// m maps a lowercase name to a one-element slice (capacity 1, so an
	// append to a slice handed out never writes into another's).
	m map[string][]string
}

// NewForwarded returns the headers of name-value pairs (names in any
// case; a later pair wins). It panics on an odd count: it is for literals.
func NewForwarded(pairs ...string) Forwarded {
	if len(pairs)%2 != 0 {
		panic("headers.NewForwarded: odd number of arguments")
	}
	f := Forwarded{m: make(map[string][]string, len(pairs)/2)}
	for i := 0; i < len(pairs); i += 2 {
		f.Set(pairs[i], pairs[i+1])
	}
	return f
}

// Get returns the value of name, "" when absent.
func (f Forwarded) Get(name string) string {
	if v := f.m[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Has reports whether name is present.
func (f Forwarded) Has(name string) bool {
	_, ok := f.m[strings.ToLower(name)]
	return ok
}

// Set sets name to value, replacing what it had.
func (f *Forwarded) Set(name, value string) {
	if f.m == nil {
		f.m = make(map[string][]string)
	}
	f.m[strings.ToLower(name)] = []string{value}
}

// Del removes name.
func (f Forwarded) Del(name string) { delete(f.m, strings.ToLower(name)) }

// Len is the number of headers.
func (f Forwarded) Len() int { return len(f.m) }

// Names lists the lowercase names, sorted.
func (f Forwarded) Names() []string { return slices.Sorted(maps.Keys(f.m)) }

// Clone returns a copy that can be edited independently.
func (f Forwarded) Clone() Forwarded {
	return Forwarded{m: maps.Clone(f.m)}
}

// WriteTo adds the headers to an outbound request's header under their
// lowercase names, without copying the values.
func (f Forwarded) WriteTo(h http.Header) {
	for k, v := range f.m {
		h[k] = v
	}
}

// set stores a value slice that is already one element with capacity 1.
func (f *Forwarded) set(lower string, v []string) {
	if f.m == nil {
		f.m = make(map[string][]string)
	}
	f.m[lower] = v
}
