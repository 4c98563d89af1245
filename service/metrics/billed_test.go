package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/service/metrics"
)

func TestPromptTokensBilled(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	assert.Equal(t, map[string]float64{"cached": 0, "computed": 0}, billed(t, m), "both series exist from the start")

	m.PromptTokensBilled(pd.Usage{Reported: true, PromptTokens: 40, CachedTokens: 16})
	m.PromptTokensBilled(pd.Usage{Reported: true, PromptTokens: 10})                  // no details: all computed
	m.PromptTokensBilled(pd.Usage{Reported: true, PromptTokens: 5, CachedTokens: 9})  // capped to the prompt
	m.PromptTokensBilled(pd.Usage{PromptTokens: 100, CachedTokens: 100})              // no usage in the answer
	m.PromptTokensBilled(pd.Usage{Reported: true, PromptTokens: 3, CachedTokens: -2}) // nonsense: none cached
	assert.Equal(t, map[string]float64{"cached": 16 + 5, "computed": 24 + 10 + 3}, billed(t, m))
}

// billed reads coordinator_prompt_tokens_billed_total by kind.
func billed(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "coordinator_prompt_tokens_billed_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			require.Len(t, s.GetLabel(), 1)
			out[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return out
}
