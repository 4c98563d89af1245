package pd

import (
	"encoding/json"
	"fmt"
	"strings"
)

// State is what prefill/decode disaggregation keeps on a request between
// its legs (RequestContext.PD): the prefill step writes it, the decode and
// conditional-decode steps and the service read it.
type State struct {
	// KVParams is the kv_transfer_params object the prefill worker answered
	// with; nil when it sent none. Done says whether a prefill ran.
	KVParams json.RawMessage
	Done     bool
	// DecodeSent says the decode step sent its leg: a request that ends
	// after Done and before it leaves the prompt's KV on the prefill worker
	// until that worker's timeout.
	DecodeSent bool
	// Fallback is set when the prefill leg failed and the prefill step let
	// decode serve the request alone (its fallback_to_decode); nil
	// otherwise. The service logs and counts it.
	Fallback *Fallback
	// Answer is what the prefill worker's answer leaves for the client's
	// (compat decisions D21 and D22: its prefix-cache hits and the prompt's
	// logprobs); zero unless Done.
	Answer PrefillAnswer
	// Usage is the token usage of the answer the client got, as it is
	// billed (after D21); the decode and conditional-decode steps set it.
	Usage Usage
}

// Fallback is a failed prefill leg that the prefill step left to decode
// alone (fallback_to_decode).
type Fallback struct {
	// Reason is FallbackStatus5xx, FallbackTransport, FallbackTimeout or
	// FallbackMissingKVParams.
	Reason string
	// Err is the leg's error, for the log.
	Err error
}

// Reasons of a prefill fallback, as metrics label them.
const (
	FallbackStatus5xx = "status_5xx" // the leg was answered 5xx
	FallbackTransport = "transport"  // no answer: refused, reset, cut short
	FallbackTimeout   = "timeout"    // no answer in time (connect, headers, idle body)
	// FallbackMissingKVParams: an answer without the kv_transfer_params
	// fields the KV connector needs (D26).
	FallbackMissingKVParams = "missing_kv_params"
)

// IncompleteKVError is a prefill answer whose kv_transfer_params lack the
// fields the KV connector needs for the decode worker to take the KV
// (decision D26): the leg succeeded, its KV is out of reach.
type IncompleteKVError struct {
	// Leg is the leg's name (prefill); StatusCode its answer's 2xx status.
	Leg        string
	StatusCode int
	// Connector is the KV connector's name; Missing the fields it needs
	// that the answer lacks (kv.Connector.MissingParams).
	Connector string
	Missing   []string
}

func (e *IncompleteKVError) Error() string {
	return fmt.Sprintf("%s: answer lacks kv_transfer_params %s (%s)", e.Leg, strings.Join(e.Missing, ", "), e.Connector)
}
