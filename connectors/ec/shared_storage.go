package ec

import "encoding/json"

// SharedStorageName is the config name of the shared-storage connector, the
// default.
const SharedStorageName = "ec-shared-storage"

// SharedStorage is for workers that exchange encoder outputs through storage
// they share, keyed by mm_hash: the prefill leg needs no ec_transfer_params.
type SharedStorage struct{}

// NewSharedStorage returns the shared-storage connector.
func NewSharedStorage() *SharedStorage { return &SharedStorage{} }

// Name returns SharedStorageName.
func (*SharedStorage) Name() string { return SharedStorageName }

// PrefillParams returns nil: the prefill leg carries no ec_transfer_params.
func (*SharedStorage) PrefillParams([]json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}

var _ Connector = (*SharedStorage)(nil)
