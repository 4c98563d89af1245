// Package fleet is the membership of the inference engines the coordinator
// controls: which workers exist per role (encode, prefill, decode), from a
// static list or from DNS, with an epoch that changes whenever the set does.
//
// A [Membership] is built from [Source]s, each answering for one or more
// roles: [Static] (the config's list) or [DNS] (a headless Kubernetes
// Service per role: the A and AAAA records of its ready pods, the port from
// the config). [Membership.Refresh] asks every source now and bumps the
// epoch only when the set of workers changed; [Membership.Run] refreshes on
// an interval until its context ends.
//
// Every [Snapshot] carries its epoch. A control call that fans out to the
// workers of a snapshot names that epoch; [Membership.Check] fails it with a
// [*StaleEpochError] naming the workers added and removed since, so a
// trainer never updates N-1 engines believing it updated N. A control call
// refreshes first (so a pod gone since the last interval is seen), then
// takes the snapshot of the epoch it was given ([Membership.At]: the
// current one, or the error) and fans out to its workers.
//
// A source that fails keeps its last good answer: a DNS server that stops
// answering does not empty a role, the refresh returns the error and the
// epoch stays. A name that resolves to nothing is an empty role, not an
// error.
package fleet

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Role is what a worker does in the pipeline.
type Role string

// The roles, in pipeline order.
const (
	Encode  Role = "encode"
	Prefill Role = "prefill"
	Decode  Role = "decode"
)

// Roles lists every role in pipeline order.
func Roles() []Role { return []Role{Encode, Prefill, Decode} }

// ParseRole returns the role named s, or an error naming the known roles.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.valid() {
		return "", fmt.Errorf("unknown role %q (known: encode, prefill, decode)", s)
	}
	return r, nil
}

func (r Role) valid() bool { return slices.Contains(Roles(), r) }

// Worker is one inference engine. Its ID is its role and address,
// role + "/" + host:port: the same engine at the same address has the same
// ID in every snapshot.
type Worker struct {
	ID      string
	Role    Role
	Address string // host:port
}

// NewWorker is the worker of role at address (host:port), its ID set.
func NewWorker(role Role, address string) Worker {
	return Worker{ID: workerID(role, address), Role: role, Address: address}
}

func workerID(role Role, address string) string { return string(role) + "/" + address }

// validate reports a worker a source must not return: an unknown role, an
// address that is not host:port with a port in 1..65535, or an ID other
// than role/address.
func (w Worker) validate() error {
	if !w.Role.valid() {
		return fmt.Errorf("worker %q: unknown role %q", w.Address, w.Role)
	}
	host, port, err := net.SplitHostPort(w.Address)
	if err != nil {
		return fmt.Errorf("worker %q: address: %w", w.Address, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); host == "" || err != nil || n == 0 {
		return fmt.Errorf("worker %q: address must be host:port with a port in 1..65535", w.Address)
	}
	if want := workerID(w.Role, w.Address); w.ID != want {
		return fmt.Errorf("worker %q: id %q must be %q", w.Address, w.ID, want)
	}
	return nil
}

// Snapshot is the membership at one epoch. Workers are sorted by ID, each
// once. A snapshot is a value: the caller may keep and modify its copy.
type Snapshot struct {
	Epoch   uint64
	Workers []Worker
}

// Role returns the snapshot's workers of role r, sorted by ID.
func (s Snapshot) Role(r Role) []Worker {
	var out []Worker
	for _, w := range s.Workers {
		if w.Role == r {
			out = append(out, w)
		}
	}
	return out
}

func (s Snapshot) clone() Snapshot {
	return Snapshot{Epoch: s.Epoch, Workers: slices.Clone(s.Workers)}
}

// normalize sorts workers by ID and drops repeats: the form of
// Snapshot.Workers.
func normalize(workers []Worker) []Worker {
	slices.SortFunc(workers, func(a, b Worker) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(workers, func(a, b Worker) bool { return a.ID == b.ID })
}
