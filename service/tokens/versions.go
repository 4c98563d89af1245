package tokens

import (
	"fmt"
	"math"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// This file reads vLLM's weight_versions (GenerateResponse and the final
// event of each choice of a GenerateStreamResponse): which weights sampled
// which of the choice's output tokens, so that an RL trainer can tell the
// tokens sampled before a weight update from those sampled after it.

// weightSpan is vLLM's WeightVersionSpan: output tokens [start, end) of the
// choice were sampled by the weights labelled version. Version is nil when
// absent or null; the bounds are wide enough to hold what no span holds
// (negative, past 32 bits), which weightVersions refuses.
type weightSpan struct {
	Version *string `json:"version"`
	Start   int64   `json:"start"`
	End     int64   `json:"end"`
}

// weightVersions checks and converts the spans of a choice whose output
// has tokens tokens (over a stream, all its events'): no more spans than
// tokens, each with a version and 0 <= start <= end < 2^32. Any other is
// a malformed answer, as a logprobs list of the wrong length is. No span
// is nil.
func weightVersions(spans []weightSpan, tokens int) ([]*coordinatorv1.WeightVersionSpan, error) {
	if len(spans) > tokens {
		return nil, fmt.Errorf(".weight_versions: %d spans for %d tokens", len(spans), tokens)
	}
	if len(spans) == 0 {
		return nil, nil
	}
	out := make([]*coordinatorv1.WeightVersionSpan, len(spans))
	for i, sp := range spans {
		switch {
		case sp.Version == nil:
			return nil, fmt.Errorf(".weight_versions[%d]: version not a string", i)
		case sp.Start < 0:
			return nil, fmt.Errorf(".weight_versions[%d]: negative start %d", i, sp.Start)
		case sp.End < sp.Start:
			return nil, fmt.Errorf(".weight_versions[%d]: end %d before start %d", i, sp.End, sp.Start)
		case sp.End > math.MaxUint32:
			return nil, fmt.Errorf(".weight_versions[%d]: end %d past 32 bits", i, sp.End)
		}
		out[i] = &coordinatorv1.WeightVersionSpan{Version: *sp.Version, Start: uint32(sp.Start), Count: uint32(sp.End - sp.Start)}
	}
	return out, nil
}

// outputCounts is the number of output tokens each choice of a stream has
// had so far, by index: a choice's last event carries the weight versions
// of all of them.
type outputCounts map[uint32]int

// add counts n more tokens of choice index and returns its count.
func (o outputCounts) add(index uint32, n int) int {
	o[index] += n
	return o[index]
}
