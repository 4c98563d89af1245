package jsonbody

import (
	"slices"
	"strings"
	"unsafe"
)

// NamesFold returns the distinct names of o's members that equal key under
// Unicode case folding (strings.EqualFold: "KV_Params", "kv_params"), in
// document order: the members a decoder that matches names without regard
// to case, as encoding/json does, reads as key. It returns nil, without
// allocating, when there are none.
func (o *Object) NamesFold(key string) []string {
	var names []string
	for i := range o.members {
		name := o.members[i].name
		if len(name) == 0 || !strings.EqualFold(unsafe.String(&name[0], len(name)), key) {
			continue
		}
		if !slices.Contains(names, string(name)) {
			names = append(names, string(name))
		}
	}
	return names
}
