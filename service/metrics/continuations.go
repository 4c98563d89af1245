package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a request a fleet pause aborted
// (coordinator_continuations_total{outcome}).
const (
	// ContinuationResumed: the fleet resumed and the request ran again.
	ContinuationResumed = "resumed"
	// ContinuationTimedOut: the resume did not come within
	// control.hold.max_wait, or control.hold.max_requests were waiting
	// (UNAVAILABLE).
	ContinuationTimedOut = "timeout"
	// ContinuationGone: the client left, or the drain began, during the wait.
	ContinuationGone = "gone"
)

// newContinuations registers coordinator_continuations_total.
func newContinuations(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_continuations_total",
		Help: "Requests a pause made through the control plane aborted, by what became of them: resumed (run again after the resume, the client's answer goes on), timeout (no resume within control.hold.max_wait, or the hold full: UNAVAILABLE), gone (the client left or the drain began during the wait).",
	}, []string{"outcome"})
	r.MustRegister(c)
	for _, o := range []string{ContinuationResumed, ContinuationTimedOut, ContinuationGone} {
		c.WithLabelValues(o)
	}
	return c
}

// Continuation counts a paused request's outcome.
func (m *Metrics) Continuation(outcome string) { m.continuations.WithLabelValues(outcome).Inc() }
