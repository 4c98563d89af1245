package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/sim"
)

// fallbackCascade is fullPipeline with the prefill step's
// fallback_to_decode on.
var fallbackCascade = strings.Replace(fullPipeline, "    - type: prefill\n",
	"    - type: prefill\n      params:\n        fallback_to_decode: true\n", 1)

func TestPrefillFallbackThroughTheApp(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fallbackCascade)
	const body = `{"model":"sim-model","messages":[{"role":"user","content":"fall back"}],"max_tokens":3}`
	const metric = `coordinator_prefill_fallbacks_total{reason="status_5xx"}`

	// A prefill worker's 500: decode serves the request alone.
	resp := st.post(t, "/v1/chat/completions", body, http.Header{sim.FaultHeader: {"prefill=status:500"}})
	answer := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, answer)
	assert.Contains(t, answer, `"chat.completion"`)
	legs := s.Legs()
	require.Equal(t, []string{
		"render::/v1/chat/completions/render",
		"gateway:decode:/v1/chat/completions:if-available",
		"gateway:prefill:/v1/chat/completions",
		"gateway:decode:/v1/chat/completions",
	}, legSummary(legs))
	assert.Equal(t, http.StatusInternalServerError, legs[2].Status)
	assert.Nil(t, field(t, legs[3].Body, "kv_transfer_params"), "aggregated decode: no KV params")
	assert.NotNil(t, field(t, legs[3].Body, "tokens"), "render's tokens still reach decode")
	assert.Equal(t, "1", st.scrape(t, metric))

	// 503 is retried first (gateway.retry, 3 attempts by default), then
	// decode serves alone.
	s.Reset()
	resp = st.post(t, "/v1/chat/completions", body, http.Header{sim.FaultHeader: {"prefill=status:503"}})
	answer = readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, answer)
	assert.Equal(t, []string{
		"gateway:prefill:/v1/chat/completions",
		"gateway:prefill:/v1/chat/completions",
		"gateway:prefill:/v1/chat/completions",
		"gateway:decode:/v1/chat/completions",
	}, legSummary(s.Legs())[2:])
	assert.Equal(t, "2", st.scrape(t, metric))

	// A prefill worker's 400 is the request's fault: it reaches the client.
	s.Reset()
	resp = st.post(t, "/v1/chat/completions", body, http.Header{sim.FaultHeader: {"prefill=status:400"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, []string{"gateway:prefill:/v1/chat/completions"}, legSummary(s.Legs())[2:], "no decode after a 4xx")
	assert.Equal(t, "2", st.scrape(t, metric), "a 4xx is no fallback")
}
