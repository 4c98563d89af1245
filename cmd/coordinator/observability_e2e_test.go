package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
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

// TestTokenMetrics: the usage of each final answer (a JSON answer, a
// stream's usage chunk, a gRPC tokens answer) is counted by API and model;
// streams time the gaps between their events; gRPC counts its answer bytes.
func TestTokenMetrics(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{TokenDelay: 5 * time.Millisecond}) // one event at a time
	st := startStack(t, gw, "", decodeOnly)
	sample := func(name, api string) float64 {
		v, err := strconv.ParseFloat(st.scrape(t, name+`{api="`+api+`",model="sim-model"}`), 64)
		require.NoError(t, err)
		return v
	}

	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":"count my tokens"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var answer struct {
		Usage struct {
			PromptTokens float64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp.Body)), &answer))
	require.Positive(t, answer.Usage.PromptTokens)
	assert.Equal(t, answer.Usage.PromptTokens, sample("coordinator_prompt_tokens_total", "rest"))
	assert.Equal(t, 4.0, sample("coordinator_generation_tokens_total", "rest"))

	// A stream with its usage chunk; its events are timed.
	resp = st.post(t, "/v1/chat/completions", `{"model":"sim-model","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},`+
		`"messages":[{"role":"user","content":"count my tokens"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readAll(t, resp.Body)
	require.Eventually(t, func() bool { return sample("coordinator_generation_tokens_total", "rest") == 9 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2*answer.Usage.PromptTokens, sample("coordinator_prompt_tokens_total", "rest"))
	gaps, err := strconv.Atoi(st.scrape(t, `coordinator_inter_token_latency_seconds_count{api="rest",endpoint="chat"}`))
	require.NoError(t, err)
	assert.Positive(t, gaps, "a gap before each event after the first batch")

	// gRPC tokens in, tokens out.
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	out, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{
		Tokens: &coordinatorv1.TokensRequest{Model: "sim-model", TokenIds: []uint32{1, 2, 3}, Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(2)}}}})
	require.NoError(t, err)
	assert.Equal(t, 3.0, sample("coordinator_prompt_tokens_total", "grpc"))
	assert.Equal(t, float64(out.GetTokens().GetUsage().GetCompletionTokens()), sample("coordinator_generation_tokens_total", "grpc"))
	assert.NotEqual(t, "0", st.scrape(t, `coordinator_body_bytes_total{api="grpc",direction="out"}`))
}

// TestMetricsPassPromtool feeds /metrics, after some traffic, to
// `promtool check metrics` (Debian's prometheus package, which
// .ci/test-deps installs; skipped outside CI where it is missing).
func TestMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed: .ci/test-deps installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	_, gw, render := startSim(t, sim.Options{})
	st := startStack(t, gw, render, fullPipeline)
	resp := st.post(t, "/v1/chat/completions", chatBody, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	metrics, err := st.client.Get(st.restURL + "/metrics")
	require.NoError(t, err)
	defer metrics.Body.Close()
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = metrics.Body
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics:\n%s", out)
}
