package headers

import (
	"hash/fnv"
	"strconv"
)

// DataParallelRank is the header vLLM reads to run a request on one
// data-parallel rank of an engine (X-data-parallel-rank).
const DataParallelRank = "x-data-parallel-rank"

// SessionID is the header that names a request's session by default
// (pipeline.session_header): the llm-d EPP's session affinity reads it.
const SessionID = "x-session-id"

// PrefillWeightVersion is the answer header naming the weight version a
// request's prefill ran on, when its answer said (a tokens-in prefill).
const PrefillWeightVersion = "x-prefill-weight-version"

// WeightVersion is the answer header naming the weight version(s) that
// served it: the worker's own, else the fleet's as the control plane knows
// it, comma-separated when it changed during the answer.
const WeightVersion = "x-weight-version"

// DPRank is the data-parallel rank of the requests keyed key (a session
// id, else the request id) on engines of size ranks: the FNV-1a hash of
// key modulo size, as text. The same key always gets the same rank, so a
// request's prefill and decode legs, and a session's turns, meet on one
// rank. size must be at least 1.
func DPRank(key string, size int) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return strconv.FormatUint(h.Sum64()%uint64(size), 10)
}
