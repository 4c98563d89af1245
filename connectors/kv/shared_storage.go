package kv

import "encoding/json"

// SharedStorageName is the config name of the shared-storage connector, the
// default.
const SharedStorageName = "kv-shared-storage"

// SharedStorage is for workers that exchange KV blocks through storage they
// share: the legs carry only the two role flags, and the prefill worker's
// answer is not needed.
type SharedStorage struct{}

// NewSharedStorage returns the shared-storage connector.
func NewSharedStorage() *SharedStorage { return &SharedStorage{} }

// Name returns SharedStorageName.
func (*SharedStorage) Name() string { return SharedStorageName }

// PrefillParams returns do_remote_decode true, do_remote_prefill false.
func (*SharedStorage) PrefillParams() (json.RawMessage, error) {
	return json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false}`), nil
}

// DecodeParams returns do_remote_decode false, do_remote_prefill true,
// whatever the prefill worker answered.
func (*SharedStorage) DecodeParams(json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"do_remote_decode":false,"do_remote_prefill":true}`), nil
}

// MissingParams returns nil: the decode worker reads the KV from the
// shared storage, whatever the prefill worker answered.
func (*SharedStorage) MissingParams(json.RawMessage) []string { return nil }

var _ Connector = (*SharedStorage)(nil)
