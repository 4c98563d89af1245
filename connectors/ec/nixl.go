package ec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/coordinator-project/coordinator/connectors"
)

// NIXLName is the config name of the NIXL connector.
const NIXLName = "ec-nixl"

// NIXL is vLLM's EC NIXL protocol: each encode worker answers with
// {mm_hash: descriptor} for the embeddings it holds, and the prefill leg
// gets all of them in one object so the prefill worker can pull each one.
// Descriptors (peer_host, peer_port, size_bytes, nixl_agent_metadata_b64,
// ...) are opaque.
type NIXL struct{}

// NewNIXL returns the NIXL connector.
func NewNIXL() *NIXL { return &NIXL{} }

// Name returns NIXLName.
func (*NIXL) Name() string { return NIXLName }

// PrefillParams flattens the encode answers, in order, into one object
// keyed by mm_hash. An answer may carry several hashes; hashes whose
// descriptor is null are dropped. A hash seen again with the same
// descriptor (same JSON value) is kept once; with a different descriptor it
// is an error, since the prefill worker could pull the wrong embedding.
// No descriptors at all gives nil.
func (*NIXL) PrefillParams(fromEncode []json.RawMessage) (json.RawMessage, error) {
	var merged map[string]json.RawMessage
	for i, raw := range fromEncode {
		obj, err := connectors.DecodeObject(raw)
		if err != nil {
			return nil, fmt.Errorf("ec_transfer_params: encoder response %d: %w", i, err)
		}
		for _, hash := range slices.Sorted(maps.Keys(obj)) {
			desc := obj[hash]
			if isNull(desc) {
				continue
			}
			if prev, seen := merged[hash]; seen {
				if !sameValue(prev, desc) {
					return nil, fmt.Errorf("ec_transfer_params: conflicting descriptors for mm_hash %q across encoder responses", hash)
				}
				continue
			}
			if merged == nil {
				merged = make(map[string]json.RawMessage, len(fromEncode))
			}
			merged[hash] = desc
		}
	}
	if len(merged) == 0 {
		return nil, nil
	}
	return connectors.EncodeObject(merged)
}

var _ Connector = (*NIXL)(nil)
