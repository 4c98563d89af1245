package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/membudget"
)

func TestBudgetMetrics(t *testing.T) {
	t.Parallel()
	m := New()
	b := membudget.New(1000, 0)
	m.Budget(b)
	a := b.Open()
	require.NoError(t, a.Take(context.Background(), 600))
	require.Error(t, b.Open().Take(context.Background(), 500)) // for now: wait
	require.Error(t, a.Take(context.Background(), 2000))       // never
	a.Give(100)

	want := `
# HELP coordinator_memory_budget_bytes The memory budget (server.memory_budget) in bytes; 0 when off.
# TYPE coordinator_memory_budget_bytes gauge
coordinator_memory_budget_bytes 1000
# HELP coordinator_memory_budget_in_use_bytes Bytes the requests in flight hold of the memory budget: bodies, their parse, media, buffered answers.
# TYPE coordinator_memory_budget_in_use_bytes gauge
coordinator_memory_budget_in_use_bytes 500
# HELP coordinator_memory_budget_peak_bytes The most bytes of the memory budget in use at once since the start.
# TYPE coordinator_memory_budget_peak_bytes gauge
coordinator_memory_budget_peak_bytes 600
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"coordinator_memory_budget_bytes", "coordinator_memory_budget_in_use_bytes", "coordinator_memory_budget_peak_bytes"))
	refusals := `
# HELP coordinator_memory_budget_refusals_total Requests the memory budget refused, by reason: wait (no room within server.memory_budget_wait: 429 with Retry-After, gRPC RESOURCE_EXHAUSTED), never (more than the whole budget: 413).
# TYPE coordinator_memory_budget_refusals_total counter
coordinator_memory_budget_refusals_total{reason="never"} 1
coordinator_memory_budget_refusals_total{reason="wait"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(refusals), "coordinator_memory_budget_refusals_total"))
	problems, err := testutil.GatherAndLint(m.Gatherer())
	require.NoError(t, err)
	assert.Empty(t, problems)
}
