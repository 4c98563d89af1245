package metrics

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// The recipe "add a metric" of CONTRIBUTING.md: a collector is one
// constructor registering it on the package's registry (in a file of its
// own when it comes with methods, as billed.go), called from New, with
// its known label values at 0; a method of Metrics records it; its row
// goes in docs/observability.md (TestObservabilityDocListsEveryMetric).

// newExampleEvictions registers coordinator_example_evictions_total on r,
// its series of the known reasons at 0.
func newExampleEvictions(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_example_evictions_total",
		Help: "Cache entries evicted, by reason (size, age).",
	}, []string{"reason"})
	r.MustRegister(c)
	for _, reason := range []string{"size", "age"} {
		c.WithLabelValues(reason)
	}
	return c
}

// Example_addAMetric registers a counter on the registry New made, counts
// one event, and runs the lint TestMetricsLintClean runs (promtool's):
// the counter passes it. A counter named without _total does not.
func Example_addAMetric() {
	m := New()
	evictions := newExampleEvictions(m.registry)
	evictions.WithLabelValues("size").Inc()
	fmt.Println("size:", testutil.ToFloat64(evictions.WithLabelValues("size")))
	fmt.Println("age: ", testutil.ToFloat64(evictions.WithLabelValues("age")))
	problems, err := testutil.GatherAndLint(m.Gatherer())
	fmt.Println("lint problems:", len(problems), err)

	bad := prometheus.NewCounter(prometheus.CounterOpts{Name: "coordinator_example_evictions", Help: "Evictions."})
	m.registry.MustRegister(bad)
	problems, _ = testutil.GatherAndLint(m.Gatherer())
	for _, p := range problems {
		fmt.Printf("lint: %s: %s\n", p.Metric, p.Text)
	}
	// Output:
	// size: 1
	// age:  0
	// lint problems: 0 <nil>
	// lint: coordinator_example_evictions: counter metrics should have "_total" suffix
}

// observabilityDoc is the page that lists every metric.
const observabilityDoc = "../../docs/observability.md"

// docMetricRow is the first cell of a metric row of its table:
// | `name` | ... or | `go_*`, `process_*` | ...
var docMetricRow = regexp.MustCompile("(?m)^\\| (`[^|]+`) \\|")

// docMetricName is each name of such a cell.
var docMetricName = regexp.MustCompile("`([a-z_:*]+)`")

// Every metric the coordinator serves has its row in
// docs/observability.md (a row ending in * covers a family of another
// library's), and every row names a metric it serves: a new collector
// fails here until it is documented, a removed one until its row goes.
func TestObservabilityDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(observabilityDoc)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## Metrics\n")
	require.True(t, ok, "%s has no Metrics section", observabilityDoc)
	section, _, _ = strings.Cut(section, "\n## ")
	var rows, prefixes []string
	for _, row := range docMetricRow.FindAllStringSubmatch(section, -1) {
		for _, match := range docMetricName.FindAllStringSubmatch(row[1], -1) {
			if name, ok := strings.CutSuffix(match[1], "*"); ok {
				prefixes = append(prefixes, name)
			} else {
				rows = append(rows, match[1])
			}
		}
	}
	require.NotEmpty(t, rows, "no metric rows in %s", observabilityDoc)

	served := servedMetrics(t)
	for _, name := range served {
		documented := slices.Contains(rows, name) || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
		assert.True(t, documented, "%s is served but has no row in docs/observability.md", name)
	}
	for _, name := range rows {
		assert.Contains(t, served, name, "docs/observability.md lists %s, which the coordinator does not serve", name)
	}
}

// servedMetrics names every metric family the registry gathers once the
// app registered them all (Budget) and each vector has a series: those
// whose label values are known at start have them; the rest get one here.
func servedMetrics(t *testing.T) []string {
	t.Helper()
	m := New()
	m.Budget(nil)
	m.KnownSteps([]string{"decode"})
	m.Tokens(APIREST, "m", 1, 1)
	m.LegDone(gateway.LegResult{Leg: "decode", Phase: gateway.ProfileDecode, StatusCode: 200})
	c := m.NewControl(func() int { return 0 }, func() bool { return false }) // with control.listen_addr set
	c.Call("pause", ControlOK, 0)
	c.WorkerFailed("pause", "decode")
	c.Fleet(1, map[[2]string]int{{"decode", FleetMember}: 1})
	rs := m.NewResponseStore() // with responses.store.backend not off
	rs.Operation("get", "memory", 0)
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	names := make([]string, 0, len(families))
	for _, f := range families {
		names = append(names, f.GetName())
	}
	return names
}
