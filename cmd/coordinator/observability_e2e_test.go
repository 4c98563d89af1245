package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/sim"
)

// scrape returns the value of one sample line of /metrics ("name{labels}"
// as Prometheus prints it, labels sorted), or 0 when absent.
func (s *stack) scrape(t *testing.T, sample string) string {
	t.Helper()
	resp, err := s.client.Get(s.restURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, line := range strings.Split(readAll(t, resp.Body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return "0"
}

func TestMetricsMoveWithRequests(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	body := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"metrics please"}]}`

	// A success: a miss, then prefill and decode.
	resp := st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, "1", st.scrape(t, `coordinator_requests_total{api="rest",endpoint="chat",status="200"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_conditional_decode_total{result="miss"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_leg_duration_seconds_count{phase="prefill",status="200"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_step_duration_seconds_count{outcome="ok",step="decode"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_time_to_first_token_seconds_count{api="rest",endpoint="chat"}`))
	assert.NotEqual(t, "0", st.scrape(t, `coordinator_body_bytes_total{api="rest",direction="in"}`))

	// The same prompt again: a conditional-decode hit skips the rest.
	resp = st.post(t, "/v1/chat/completions", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, "1", st.scrape(t, `coordinator_conditional_decode_total{result="hit"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_step_duration_seconds_count{outcome="skipped",step="prefill"}`))

	// A leg failure: prefill answers 500, the client gets 502.
	resp = st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Sim-Fault": {"prefill=status:500"}})
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, readAll(t, resp.Body))
	assert.Equal(t, "1", st.scrape(t, `coordinator_requests_total{api="rest",endpoint="chat",status="502"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_leg_duration_seconds_count{phase="prefill",status="500"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_step_duration_seconds_count{outcome="error",step="prefill"}`))

	// A client that goes away mid-stream.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.restURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"cancel me"}]}`))
	req.Header.Set("X-Sim-Fault", "decode=hang")
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	_, err := st.client.Do(req)
	require.Error(t, err)
	require.Eventually(t, func() bool {
		return st.scrape(t, `coordinator_step_duration_seconds_count{outcome="error",step="decode"}`) == "1" &&
			st.scrape(t, `coordinator_in_flight{api="rest",kind="stream"}`) == "0"
	}, 5*time.Second, 20*time.Millisecond, "the cancelled decode is counted and nothing stays in flight")
	assert.Equal(t, "1", st.scrape(t, `coordinator_requests_total{api="rest",endpoint="chat",status="499"}`))
}

func TestServerTiming(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"timing"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	timing := resp.Header.Get("Server-Timing")
	for _, step := range []string{"render;dur=", "conditional-decode;dur=", "prefill;dur=", ", decode;dur="} {
		assert.Contains(t, timing, step)
	}

	resp = st.post(t, "/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"timing stream"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	timing = resp.Header.Get("Server-Timing")
	assert.Contains(t, timing, "prefill;dur=", "steps done before the first byte")
	assert.NotContains(t, ", "+timing, ", decode;dur=", "decode was still streaming")
}
