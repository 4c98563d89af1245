//go:build !race

package requestbody

// raceEnabled: the race detector is on, and allocations are not what they
// are without it.
const raceEnabled = false
