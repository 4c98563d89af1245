package sim

import (
	"context"
	"net/http"
	"time"
)

// LegEnd reports that a leg's request context ended: the client went away
// (closed the connection or reset the stream) or the handler returned.
type LegEnd struct {
	// Target is the leg's [FaultHeader] target: encode, prefill, decode,
	// conditional or render.
	Target string
	// RequestID is the leg's x-request-id header ("" when absent).
	RequestID string
	// At is when the context ended, as seen by the simulator.
	At time.Time
}

// watchLeg calls [Options.OnLegEnd], if set, once r's context ends.
func (s *Sim) watchLeg(r *http.Request, target string) {
	onEnd := s.opts.OnLegEnd
	if onEnd == nil {
		return
	}
	id := r.Header.Get("X-Request-Id")
	context.AfterFunc(r.Context(), func() {
		onEnd(LegEnd{Target: target, RequestID: id, At: time.Now()})
	})
}
