// Package responsestore keeps what the OpenAI Responses and Conversations
// APIs store (a response's input and output items, a conversation's
// items), for the coordinator: in a disaggregated fleet no worker can keep
// them (the next turn lands on another decode pod, and prefill never sees
// it), so the orchestrator does.
//
// A [Store] maps a [Key] (tenant, kind, id) to bytes with a time to live.
// Two backends: [Memory] (in process, the embedded default: bounded by
// bytes and count, the least recently used evicted first) and [Redis]
// (shared by every replica). Neither interprets the bytes.
//
// Tenants never meet: the tenant is part of every key, so another
// tenant's id is a missing one, and ids are unguessable ([NewID]).
package responsestore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// ErrNotFound is Get's and Delete's answer for a key that is not stored
// (never stored, expired, evicted, deleted, or another tenant's).
var ErrNotFound = errors.New("not found")

// ErrUnavailable wraps the failures of a backend that cannot be reached:
// a request that needs the store gets 503.
var ErrUnavailable = errors.New("response store unavailable")

// ErrTooLarge is Put's answer for a value larger than the store takes.
var ErrTooLarge = errors.New("value larger than the store takes")

// Key names one stored value.
type Key struct {
	// Tenant owns the value ("" is the tenant of requests without one).
	Tenant string
	// Kind is what the value is: "response", "conversation", ...
	Kind string
	// ID is the object's id (NewID).
	ID string
}

// String is the key as the backends store it: kind, a hash of the tenant
// (the tenant may be a credential's digest: it is not stored as it is),
// and the id.
func (k Key) String() string {
	sum := sha256.Sum256([]byte(k.Tenant))
	return k.Kind + ":" + hex.EncodeToString(sum[:12]) + ":" + k.ID
}

// Store keeps values by key. Implementations are safe for concurrent use.
type Store interface {
	// Put stores value under key for ttl (> 0), replacing what was there.
	Put(ctx context.Context, key Key, value []byte, ttl time.Duration) error
	// Get returns the value of key, or ErrNotFound.
	Get(ctx context.Context, key Key) ([]byte, error)
	// Delete removes key; ErrNotFound when it was not stored.
	Delete(ctx context.Context, key Key) error
	// Update replaces the value of key with fn's answer for it (old is
	// nil when key is not stored), for ttl, atomically: no other Put,
	// Update or Delete of key lands between the read and the write, so
	// two updates appending to one value both land. An error of fn is
	// Update's, nothing written. fn may run more than once (Redis retries
	// a transaction another client's write aborted), must not keep old,
	// and hands the store the value it returns (not to be changed after).
	Update(ctx context.Context, key Key, ttl time.Duration, fn func(old []byte) ([]byte, error)) error
}

// NewID is a new unguessable id with prefix ("resp", "conv", "msg"):
// prefix, "_", then 32 hex digits of crypto/rand (128 bits).
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + "_" + hex.EncodeToString(b[:])
}
