// Package kv holds the KV-cache transfer connectors: each one owns the wire
// shape of the kv_transfer_params object sent on the prefill and decode legs.
package kv

import (
	"encoding/json"

	"github.com/coordinator-project/coordinator/connectors"
)

// Connector shapes kv_transfer_params for one KV transfer protocol.
// Implementations are safe for concurrent use and do no I/O. Every result is
// a fresh slice the caller owns; arguments are neither modified nor retained.
type Connector interface {
	// Name is the connector's config name, e.g. "kv-nixl".
	Name() string
	// PrefillParams returns the kv_transfer_params JSON object for a
	// prefill leg. It is called once per request.
	PrefillParams() (json.RawMessage, error)
	// DecodeParams returns the kv_transfer_params JSON object for the decode
	// leg that follows a prefill. fromPrefill is the kv_transfer_params object
	// the prefill worker answered with, or nil when it sent none; a JSON value
	// that is not an object counts as none, malformed JSON is an error. Values
	// taken from fromPrefill are opaque: they are copied byte for byte, never
	// re-typed (simulators send remote_block_ids as strings, vLLM as ints).
	DecodeParams(fromPrefill json.RawMessage) (json.RawMessage, error)
	// MissingParams names the fields the decode worker needs from the
	// prefill worker's answer that fromPrefill (as DecodeParams takes it)
	// lacks or holds as null, in a fixed order; nil when it has them all.
	// A fromPrefill that is nil, not an object or malformed lacks every
	// one. A connector that needs nothing from the answer returns nil.
	MissingParams(fromPrefill json.RawMessage) []string
}

// Default is the connector used when the config names none.
const Default = SharedStorageName

// Set is the KV connectors known to the app, by name.
type Set = connectors.Set[Connector]

// NewSet indexes connectors by name; two with one name are an error.
func NewSet(all []Connector) (*Set, error) {
	return connectors.NewSet("kv_connector", Default, all)
}
