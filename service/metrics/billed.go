package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinator-project/coordinator/internal/wire/pd"
)

// Kinds of billed prompt tokens (PromptTokensBilled).
const (
	PromptCached   = "cached"
	PromptComputed = "computed"
)

// newBilled registers coordinator_prompt_tokens_billed_total on r.
func newBilled(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinator_prompt_tokens_billed_total",
		Help: "Prompt tokens of the answers clients got, by kind as they are billed: cached (usage.prompt_tokens_details.cached_tokens; " +
			"after prefill/decode disaggregation the prefill worker's prefix-cache hits) and computed (the rest of usage.prompt_tokens).",
	}, []string{"kind"})
	r.MustRegister(c)
	for _, kind := range []string{PromptCached, PromptComputed} {
		c.WithLabelValues(kind) // both series exist from the start
	}
	return c
}

// PromptTokensBilled counts the prompt tokens of an answer by kind; an
// answer without a usage counts nothing. A cached count above the prompt's
// (a worker's error) is capped to it.
func (m *Metrics) PromptTokensBilled(u pd.Usage) {
	if !u.Reported || u.PromptTokens <= 0 {
		return
	}
	cached := min(max(u.CachedTokens, 0), u.PromptTokens)
	m.billed.WithLabelValues(PromptCached).Add(float64(cached))
	m.billed.WithLabelValues(PromptComputed).Add(float64(u.PromptTokens - cached))
}
