// Package ec holds the encoder-cache transfer connectors: each one owns the
// wire shape of the ec_transfer_params object that carries encoded image
// embeddings from the encode legs to the prefill leg.
package ec

import (
	"encoding/json"

	"github.com/coordinator-project/coordinator/connectors"
)

// Connector shapes ec_transfer_params for one EC transfer protocol.
// Implementations are safe for concurrent use and do no I/O. Every result is
// a fresh slice the caller owns; arguments are neither modified nor retained.
type Connector interface {
	// Name is the connector's config name, e.g. "ec-nixl".
	Name() string
	// PrefillParams merges the ec_transfer_params the encode legs answered
	// with, in multimodal entry order, into the ec_transfer_params object
	// for the prefill leg. An element that is nil, JSON null or not an
	// object means that encoder sent none; malformed JSON is an error.
	// Descriptors are opaque: they are copied byte for byte, never re-typed.
	// A nil result means the prefill leg carries no ec_transfer_params.
	PrefillParams(fromEncode []json.RawMessage) (json.RawMessage, error)
}

// Default is the connector used when the config names none.
const Default = SharedStorageName

// Set is the EC connectors known to the app, by name.
type Set = connectors.Set[Connector]

// NewSet indexes connectors by name; two with one name are an error.
func NewSet(all []Connector) (*Set, error) {
	return connectors.NewSet("ec_connector", Default, all)
}
