package fleet

import "sync/atomic"

// Version is the weight version of the whole fleet as the control plane
// knows it: the one every engine reported or was given last, with no
// engine left out; "" when unknown or mixed. A nil *Version knows none.
// Safe for concurrent use.
type Version struct{ v atomic.Pointer[string] }

// Set records v as every engine's version ("": unknown).
func (f *Version) Set(v string) {
	if f != nil {
		f.v.Store(&v)
	}
}

// Get is the fleet's version, "" when unknown.
func (f *Version) Get() string {
	if f == nil {
		return ""
	}
	if v := f.v.Load(); v != nil {
		return *v
	}
	return ""
}
