package kv

import "encoding/json"

// NIXLName is the config name of the NIXL connector.
const NIXLName = "kv-nixl"

// NIXL is vLLM's NixlConnector protocol. The prefill leg asks the worker to
// keep its KV blocks for a remote decode and to answer with where they are;
// the decode leg hands that answer, verbatim, to the decode worker, which
// pulls the blocks.
type NIXL struct{}

// NewNIXL returns the NIXL connector.
func NewNIXL() *NIXL { return &NIXL{} }

// Name returns NIXLName.
func (*NIXL) Name() string { return NIXLName }

// PrefillParams returns the flags for a remote decode and null placeholders
// for the fields the prefill worker fills in.
func (*NIXL) PrefillParams() (json.RawMessage, error) {
	return json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,` +
		`"remote_block_ids":null,"remote_engine_id":null,"remote_host":null,"remote_port":null}`), nil
}

// DecodeParams returns every field of the prefill worker's answer, verbatim
// (remote_engine_id, remote_block_ids, remote_host, remote_port, tp_size,
// anything else), with do_remote_decode false and do_remote_prefill true.
func (*NIXL) DecodeParams(fromPrefill json.RawMessage) (json.RawMessage, error) {
	return handOff(fromPrefill)
}

// MissingParams names which of remote_engine_id, remote_block_ids,
// remote_host and remote_port the answer lacks: without them vLLM's
// NixlConnector on the decode worker logs "Got invalid KVTransferParams"
// and computes the whole prompt again, or, without remote_block_ids,
// transfers nothing. remote_request_id and tp_size are not required: the
// llm-d inference simulator leaves them out.
func (*NIXL) MissingParams(fromPrefill json.RawMessage) []string {
	return missing(fromPrefill, "remote_engine_id", "remote_block_ids", "remote_host", "remote_port")
}

var _ Connector = (*NIXL)(nil)
