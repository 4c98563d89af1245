package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinator-project/coordinator/internal/membudget"
)

// Reasons the memory budget refuses a request (coordinator_memory_budget_refusals_total).
const (
	// BudgetRefusedWait: no room within server.memory_budget_wait (429).
	BudgetRefusedWait = "wait"
	// BudgetRefusedNever: more than the whole budget (413).
	BudgetRefusedNever = "never"
)

// Budget registers the memory budget's metrics, read from b at each
// scrape: its limit, the bytes in use and their peak, and the refusals by
// reason. Call it once; a nil b (no budget) shows a limit of 0.
func (m *Metrics) Budget(b *membudget.Budget) {
	gauge := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	refusals := func(reason string, f func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "coordinator_memory_budget_refusals_total",
			Help:        "Requests the memory budget refused, by reason: wait (no room within server.memory_budget_wait: 429 with Retry-After, gRPC RESOURCE_EXHAUSTED), never (more than the whole budget: 413).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(f()) })
	}
	m.registry.MustRegister(
		gauge("coordinator_memory_budget_bytes", "The memory budget (server.memory_budget) in bytes; 0 when off.", b.Limit),
		gauge("coordinator_memory_budget_in_use_bytes", "Bytes the requests in flight hold of the memory budget: bodies, their parse, media, buffered answers.", b.InUse),
		gauge("coordinator_memory_budget_peak_bytes", "The most bytes of the memory budget in use at once since the start.", b.Peak),
		refusals(BudgetRefusedWait, func() int64 { return b.Refused() - b.RefusedNever() }),
		refusals(BudgetRefusedNever, b.RefusedNever),
	)
}
