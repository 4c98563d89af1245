package metrics

import "github.com/prometheus/client_golang/prometheus"

// newVersionMismatches registers coordinator_weight_version_mismatches_total.
func newVersionMismatches(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_weight_version_mismatches_total",
		Help: "Tokens answers whose prefill and decode ran on different weight versions, by pipeline.version_policy: any (served), consistent (refused, UNAVAILABLE).",
	}, []string{"policy"})
	r.MustRegister(c)
	c.WithLabelValues("any")
	c.WithLabelValues("consistent")
	return c
}

// WeightVersionMismatch counts a tokens answer whose prefill and decode
// versions differ, under policy.
func (m *Metrics) WeightVersionMismatch(policy string) { m.mismatches.WithLabelValues(policy).Inc() }
