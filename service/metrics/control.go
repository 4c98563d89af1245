package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a control call (coordinator_control_calls_total{outcome}).
const (
	// ControlOK: every targeted worker answered 2xx.
	ControlOK = "ok"
	// ControlWorkerFailed: some worker did not (UNAVAILABLE, REST 502).
	ControlWorkerFailed = "worker_failed"
	// ControlStaleEpoch: the call named an old epoch (FAILED_PRECONDITION).
	ControlStaleEpoch = "stale_epoch"
	// ControlInvalid: the call was refused before any worker was asked.
	ControlInvalid = "invalid"
	// ControlUnauthenticated: no valid token.
	ControlUnauthenticated = "unauthenticated"
)

// Worker states of coordinator_fleet_workers{state}.
const (
	FleetMember    = "member"
	FleetReachable = "reachable"
	FleetPaused    = "paused"
	FleetSleeping  = "sleeping"
)

// Control are the control plane's collectors: calls by route and outcome
// and their duration, worker failures by route and role, the fleet's
// workers by role and state, and the requests held at admission during a
// pause.
type Control struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
	workers  *prometheus.GaugeVec
	epoch    prometheus.Gauge
}

// NewControl registers the control plane's collectors on m's registry;
// waiting and paused are read at each scrape (the hold's count of held
// requests and whether it is closed). Call it once.
func (m *Metrics) NewControl(waiting func() int, paused func() bool) *Control {
	c := &Control{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinator_control_calls_total",
			Help: "ControlService calls by engine route (pause, resume, update_weight_version, ..., workers for a listing) and outcome: ok, worker_failed (UNAVAILABLE, REST 502), stale_epoch (FAILED_PRECONDITION, REST 409), invalid, unauthenticated.",
		}, []string{"route", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coordinator_control_call_duration_seconds",
			Help:    "ControlService call latency by engine route: the membership refresh and the fan-out to every targeted worker.",
			Buckets: requestBuckets,
		}, []string{"route"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinator_control_worker_failures_total",
			Help: "Workers that failed a control call (no answer, a timeout, or a non-2xx status), by engine route and role.",
		}, []string{"route", "role"}),
		workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coordinator_fleet_workers",
			Help: "Workers of the control plane's membership by role and state: member (in the membership), and, as their last listing found them, reachable, paused, sleeping.",
		}, []string{"role", "state"}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coordinator_fleet_membership_epoch",
			Help: "The control plane membership's epoch: it grows each time the set of workers changes.",
		}),
	}
	m.registry.MustRegister(c.calls, c.duration, c.failures, c.workers, c.epoch,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "coordinator_held_requests",
			Help: "Inference requests waiting at admission now for a resume of the fleet.",
		}, func() float64 { return float64(waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "coordinator_fleet_paused",
			Help: "1 while a pause made through the control plane is in force (new inference requests are held), else 0.",
		}, func() float64 {
			if paused() {
				return 1
			}
			return 0
		}),
	)
	return c
}

// newHeld registers coordinator_held_requests_total, its outcomes at 0.
func newHeld(r *prometheus.Registry) *prometheus.CounterVec {
	held := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_held_requests_total",
		Help: "Inference requests held at admission during a pause made through the control plane, by outcome: served (the resume came), timeout (control.hold.max_wait, 503), full (control.hold.max_requests, 503), gone (the client left or the server drained).",
	}, []string{"outcome"})
	r.MustRegister(held)
	for _, o := range []string{"served", "timeout", "full", "gone"} {
		held.WithLabelValues(o)
	}
	return held
}

// HoldOutcome counts a request held during a pause by its outcome
// (admission.HoldServed, ...).
func (m *Metrics) HoldOutcome(outcome string) { m.held.WithLabelValues(outcome).Inc() }

// Call counts one control call of route with its outcome and duration.
func (c *Control) Call(route, outcome string, d time.Duration) {
	c.calls.WithLabelValues(route, outcome).Inc()
	c.duration.WithLabelValues(route).Observe(d.Seconds())
}

// WorkerFailed counts a worker of role that failed route.
func (c *Control) WorkerFailed(route, role string) { c.failures.WithLabelValues(route, role).Inc() }

// Fleet sets the workers by role and state, and the epoch.
func (c *Control) Fleet(epoch uint64, counts map[[2]string]int) {
	c.epoch.Set(float64(epoch))
	c.workers.Reset()
	for k, n := range counts {
		c.workers.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
