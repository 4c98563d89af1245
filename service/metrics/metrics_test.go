package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// The metrics pass the same lint as `promtool check metrics` (the
// linter it runs): names, suffixes, units, help text.
func TestMetricsLintClean(t *testing.T) {
	t.Parallel()
	m := New()
	m.KnownSteps([]string{"render", "decode"})
	m.Tokens(APIREST, "m", 3, 4)
	problems, err := testutil.GatherAndLint(m.Gatherer())
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Counters that dashboards and alerts rate are there at 0 before the
// first event, for each of their known label values.
func TestKnownSeriesStartAtZero(t *testing.T) {
	t.Parallel()
	m := New()
	m.KnownSteps([]string{"prefill"})
	for _, tt := range []struct{ metric, series string }{
		{"coordinator_prefill_fallbacks_total", `coordinator_prefill_fallbacks_total{reason="timeout"} 0`},
		{"coordinator_prefill_fallbacks_total", `coordinator_prefill_fallbacks_total{reason="status_5xx"} 0`},
		{"coordinator_prefill_fallbacks_total", `coordinator_prefill_fallbacks_total{reason="missing_kv_params"} 0`},
		{"coordinator_rejected_requests_total", `coordinator_rejected_requests_total{reason="streams"} 0`},
		{"coordinator_conditional_decode_total", `coordinator_conditional_decode_total{result="hit"} 0`},
		{"coordinator_requests_total", `coordinator_requests_total{api="rest",endpoint="chat",status="200"} 0`},
		{"coordinator_requests_total", `coordinator_requests_total{api="grpc",endpoint="generate",status="OK"} 0`},
		{"coordinator_body_bytes_total", `coordinator_body_bytes_total{api="grpc",direction="out"} 0`},
		{"coordinator_in_flight", `coordinator_in_flight{api="rest",kind="stream"} 0`},
		{"coordinator_tls_reloads_total", `coordinator_tls_reloads_total{file_set="gateway.tls",result="error"} 0`},
		{"coordinator_step_duration_seconds", `coordinator_step_duration_seconds_count{outcome="error",step="prefill"} 0`},
		{"coordinator_inter_token_latency_seconds", `coordinator_inter_token_latency_seconds_count{api="rest",endpoint="chat"} 0`},
	} {
		assert.Contains(t, scrape(t, m), tt.series, tt.metric)
	}
}

// The model label takes the first maxModels models; the rest count as
// "other", so clients cannot grow the series without bound.
func TestModelLabelIsBounded(t *testing.T) {
	t.Parallel()
	m := New()
	for i := range maxModels + 10 {
		m.Tokens(APIGRPC, fmt.Sprintf("model-%d", i), 1, 2)
	}
	m.Tokens(APIGRPC, "model-0", 1, 2)
	out := scrape(t, m)
	assert.Contains(t, out, `coordinator_prompt_tokens_total{api="grpc",model="model-0"} 2`)
	assert.Contains(t, out, fmt.Sprintf(`coordinator_generation_tokens_total{api="grpc",model="model-%d"} 2`, maxModels-1))
	assert.NotContains(t, out, fmt.Sprintf(`model="model-%d"`, maxModels))
	assert.Contains(t, out, `coordinator_generation_tokens_total{api="grpc",model="other"} 20`)
	assert.Equal(t, maxModels+1, strings.Count(out, "coordinator_prompt_tokens_total{"))
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := make([]string, 0, len(metric.GetLabel()))
			for _, l := range metric.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name, value := f.GetName(), 0.0
			switch {
			case metric.GetCounter() != nil:
				value = metric.GetCounter().GetValue()
			case metric.GetGauge() != nil:
				value = metric.GetGauge().GetValue()
			case metric.GetHistogram() != nil:
				name, value = name+"_count", float64(metric.GetHistogram().GetSampleCount())
			}
			fmt.Fprintf(&b, "%s{%s} %g\n", name, strings.Join(labels, ","), value)
		}
	}
	return b.String()
}

// A leg's attempts past the first count as retries of its phase.
func TestLegRetries(t *testing.T) {
	t.Parallel()
	m := New()
	assert.Contains(t, scrape(t, m), `coordinator_leg_retries_total{phase="prefill"} 0`)
	m.LegDone(gateway.LegResult{Leg: "prefill", Phase: "prefill", StatusCode: 503, Attempt: 1})
	m.LegDone(gateway.LegResult{Leg: "prefill", Phase: "prefill", StatusCode: 200, Attempt: 2})
	assert.Contains(t, scrape(t, m), `coordinator_leg_retries_total{phase="prefill"} 1`)
}
