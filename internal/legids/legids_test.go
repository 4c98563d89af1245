package legids

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLegsNameTheRequestsInFlightByTheirClientsIDs(t *testing.T) {
	t.Parallel()
	var r Registry
	removeA := r.Add("rollout-1", "rollout-1-00000000000000aa")
	r.Add("rollout-1", "rollout-1-00000000000000bb") // the same client id, twice in flight
	r.Add("rollout-2", "rollout-2-00000000000000cc")
	r.Add("minted", "minted") // an id the coordinator made: its legs carry it

	assert.ElementsMatch(t, []string{"rollout-1", "rollout-1-00000000000000aa", "rollout-1-00000000000000bb"}, r.Legs([]string{"rollout-1"}))
	assert.ElementsMatch(t, []string{"minted", "unknown"}, r.Legs([]string{"minted", "unknown", "minted"}))

	removeA()
	assert.ElementsMatch(t, []string{"rollout-1", "rollout-1-00000000000000bb"}, r.Legs([]string{"rollout-1"}), "an ended request is not named")
	assert.Empty(t, r.Legs(nil))
}

func TestANilRegistryRecordsNothing(t *testing.T) { // not parallel: AllocsPerRun
	var r *Registry
	r.Add("a", "a-1")() // no panic, nothing kept
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { r.Add("a", "a-1")() }), "free on the request path")
}
