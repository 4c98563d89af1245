package fleet

import (
	"fmt"
	"strings"
)

// maxListed is how many workers an error or log line names before "and N
// more".
const maxListed = 8

// StaleEpochError is Check's answer to an epoch other than the current
// one: what changed between the caller's snapshot and now.
type StaleEpochError struct {
	// Have is the caller's epoch, Current the membership's.
	Have, Current uint64
	// Added and Removed are the workers in the current snapshot and not in
	// the caller's, and the other way round, sorted by ID; set only when
	// Diff is true.
	Added, Removed []Worker
	// Diff is true when Have was still in the history kept, so Added and
	// Removed were computed. A change and its undoing (a worker that left
	// and came back) leaves both empty with Diff true.
	Diff bool
	// First is the membership's first epoch: a Have below it was listed by
	// an earlier incarnation of the process.
	First uint64
}

// Error names the change: the workers added and removed, or how many
// times the membership changed when Have is past the history, or that
// Have is newer than the membership (it restarted since the caller's
// listing).
func (e *StaleEpochError) Error() string {
	var b strings.Builder
	if e.Have > e.Current {
		fmt.Fprintf(&b, "fleet: unknown epoch %d (current %d)", e.Have, e.Current)
		return b.String()
	}
	if e.Have < e.First {
		fmt.Fprintf(&b, "fleet: epoch %d is from before this coordinator started (its first epoch is %d, current %d)", e.Have, e.First, e.Current)
		return b.String()
	}
	fmt.Fprintf(&b, "fleet: stale epoch %d (current %d): ", e.Have, e.Current)
	switch {
	case !e.Diff:
		fmt.Fprintf(&b, "membership changed %d times since", e.Current-e.Have)
	case len(e.Added) == 0 && len(e.Removed) == 0:
		fmt.Fprintf(&b, "workers left and came back in %d changes", e.Current-e.Have)
	default:
		var parts []string
		if len(e.Added) > 0 {
			parts = append(parts, "added "+ids(e.Added, maxListed))
		}
		if len(e.Removed) > 0 {
			parts = append(parts, "removed "+ids(e.Removed, maxListed))
		}
		b.WriteString(strings.Join(parts, "; "))
	}
	return b.String()
}

// Check returns nil when epoch is the current one, and otherwise a
// *StaleEpochError naming what changed since: a control call made on the
// snapshot of epoch would miss or wrongly include the workers it names.
func (m *Membership) Check(epoch uint64) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.check(epoch)
}

// At returns the current snapshot when its epoch is epoch, and otherwise
// Check's error, in one step: a refresh between a Check and a Current
// cannot slip in. A control call fans out to At's workers.
func (m *Membership) At(epoch uint64) (Snapshot, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(epoch); err != nil {
		return Snapshot{}, err
	}
	return m.history[len(m.history)-1].clone(), nil
}

// check is Check; the caller holds mu.
func (m *Membership) check(epoch uint64) error {
	cur := m.history[len(m.history)-1]
	if epoch == cur.Epoch {
		return nil
	}
	e := &StaleEpochError{Have: epoch, Current: cur.Epoch, First: m.first}
	if oldest := m.history[0].Epoch; epoch >= oldest && epoch < cur.Epoch {
		e.Added, e.Removed = diff(m.history[epoch-oldest].Workers, cur.Workers)
		e.Diff = true
	}
	return e
}

// diff returns the workers of cur not in old and of old not in cur; both
// are sorted by ID.
func diff(old, cur []Worker) (added, removed []Worker) {
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(old) && old[i].ID < cur[j].ID):
			removed = append(removed, old[i])
			i++
		case i == len(old) || cur[j].ID < old[i].ID:
			added = append(added, cur[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return added, removed
}

// ids lists the workers' IDs, comma-separated, the first limit of them
// and then "and N more".
func ids(workers []Worker, limit int) string {
	var b strings.Builder
	for i, w := range workers {
		if i == limit {
			fmt.Fprintf(&b, " and %d more", len(workers)-limit)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(w.ID)
	}
	return b.String()
}
