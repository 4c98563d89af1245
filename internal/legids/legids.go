// Package legids records the requests in flight by their client's id and
// the id their legs carry (compat D25: the two differ), so that a control
// call naming a client's request id (abort this rollout) reaches the
// engines with the ids they know.
package legids

import "sync"

// Registry is the set of requests in flight. Add and its remove cost one
// sync.Map store and delete on a key of their own (no lock shared by the
// requests); Legs walks the requests in flight, for the rare control call.
// Safe for concurrent use.
type Registry struct {
	byLeg sync.Map // leg id → client id
}

// Add records a request with client id id whose legs carry legID, until
// the returned remove is called (once, when the request ends). A nil
// Registry records nothing (no control plane reads it), at no cost.
func (r *Registry) Add(id, legID string) (remove func()) {
	if r == nil {
		return noRemove
	}
	r.byLeg.Store(legID, id)
	return func() { r.byLeg.Delete(legID) }
}

// Legs returns the leg ids of the requests in flight whose client id is
// one of ids, and each id itself (a request whose legs carry the client's
// id, or one an engine knows by it): what to name to the engines.
func (r *Registry) Legs(ids []string) []string {
	want := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !want[id] {
			want[id] = true
			out = append(out, id)
		}
	}
	r.byLeg.Range(func(leg, id any) bool {
		if l := leg.(string); want[id.(string)] && !want[l] {
			out = append(out, l)
		}
		return true
	})
	return out
}

func noRemove() {}
