package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
	"github.com/coordinator-project/coordinator/sim"
)

func TestTripwireSpeaksTheSimulatorsFaultHeader(t *testing.T) {
	t.Parallel()
	assert.Equal(t, sim.FaultHeader, simFaultHeader)
	target, fault, ok := strings.Cut(conditionalTripwire, "=")
	require.True(t, ok)
	assert.Equal(t, sim.FaultTargetConditional, target)
	assert.Equal(t, "reset-mid-stream", fault)
}

func TestPromptTokensOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  string
		want    int
		wantErr bool
	}{
		{name: "completion", answer: `{"choices":[],"usage":{"prompt_tokens":32768,"completion_tokens":30}}`, want: 32768},
		{name: "no usage", answer: `{"choices":[]}`, wantErr: true},
		{name: "no choices", answer: `{"usage":{"prompt_tokens":1}}`, wantErr: true},
		{name: "error body", answer: `{"error":{"message":"boom"}}`, wantErr: true},
		{name: "cut short", answer: `{"choices":[],"usa`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := promptTokensOf([]byte(tt.answer))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCoordinatorConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    pipeline
		want string
	}{
		{
			name: "decode only",
			p:    decodeOnly,
			want: "pipeline:\n  steps:\n    - type: decode\n",
		},
		{
			name: "cascade",
			p:    cascadePipeline,
			want: "pipeline:\n  kv_connector: kv-nixl\n  ec_connector: ec-nixl\n  steps:\n" +
				"    - type: render\n      params:\n        address: \"http://127.0.0.1:3\"\n" +
				"    - type: conditional-decode\n    - type: encode\n    - type: prefill\n    - type: decode\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(coordinatorConfig("127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:4", "http://127.0.0.1:3", tt.p))
			assert.Contains(t, got, "  listen_addr: \"127.0.0.1:1\"\n  grpc_listen_addr: \"127.0.0.1:2\"\n")
			assert.Contains(t, got, "  max_concurrent_requests: 0\n  max_concurrent_streams: 0\n", "no admission cap")
			assert.Contains(t, got, "gateway:\n  address: \"http://127.0.0.1:4\"\n")
			_, pipelineSection, ok := strings.Cut(got, "pipeline:\n")
			require.True(t, ok)
			assert.Equal(t, tt.want, "pipeline:\n"+pipelineSection)
		})
	}
}

func TestSplitAndSelectScenarios(t *testing.T) {
	t.Parallel()
	picked, err := selectScenarios("cascade-chat-32k, chat, mem-image-40mb")
	require.NoError(t, err)
	hop, cascade, probes := splitScenarios(picked)
	assert.Equal(t, []string{"chat"}, names(hop))
	assert.Equal(t, []string{"cascade-chat-32k"}, names(cascade))
	assert.Equal(t, []string{"mem-image-40mb"}, names(probes))

	all, err := selectScenarios(scenarioNames())
	require.NoError(t, err)
	hop, cascade, probes = splitScenarios(all)
	assert.Equal(t, []string{"chat", "chat-stream", "chat-mixed-1kb", "epd-image-1mb-text-64k", "epd-image-1mb-text-64k-paced"}, names(hop))
	assert.Equal(t, []string{"cascade-image-1mb", "cascade-prompt-32k", "cascade-chat-32k"}, names(cascade))
	assert.Equal(t, []string{"mem-tokens-20mb", "mem-tokens-20mb-decode", "mem-tokens-64mb", "mem-image-40mb", "mem-chat-blocks", "mem-chat-messages-60mb", "idle-streams", "control-fanout"}, names(probes))
	for _, sc := range cascade {
		assert.NotNil(t, sc.newTemplate, sc.name)
		assert.Equal(t, cascadePipeline.key(), sc.pipeline.key(), sc.name)
		assert.NotEmpty(t, sc.about, sc.name)
	}
	for _, sc := range probes {
		assert.NotEmpty(t, sc.about, sc.name)
		if sc.probe == probeMemory {
			assert.NotNil(t, sc.newTemplate, sc.name)
			assert.Positive(t, sc.memGoal, sc.name)
		}
	}
}

func names(scs []scenario) []string {
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.name
	}
	return out
}

// testCell is a measured cell with the given per-request CPU and TTFB p50
// of its targets, in µs.
func testCell(name string, cascade bool, targets ...[2]int) *cell {
	c := &cell{Scenario: name, Concurrency: 4, Cascade: cascade}
	for i, v := range targets {
		c.Targets = append(c.Targets, &targetResult{
			Target: []string{"a", "b", "c"}[i],
			Summary: summary{
				Requests:  10,
				CPUPerReq: time.Duration(v[0]) * time.Microsecond,
				TTFBp50:   time.Duration(v[1]) * time.Microsecond,
				TTFBp99:   2 * time.Duration(v[1]) * time.Microsecond,
				SimPerReq: time.Duration(v[0]) * time.Microsecond,
			},
		})
	}
	return c
}

func TestSummariesKeepToTheirCells(t *testing.T) {
	t.Parallel()
	hop := testCell("chat", false, [2]int{0, 100}, [2]int{300, 200}, [2]int{400, 250})
	cascade := testCell("cascade-image-1mb", true, [2]int{1000, 2000}, [2]int{6000, 9000})

	var w bytes.Buffer
	writeSummary(&w, []*cell{hop, cascade})
	writeCascadeSummary(&w, []*cell{hop, cascade})
	out := w.String()
	assert.Equal(t, 1, strings.Count(out, "\nchat "), "the hop summary has the hop cell:\n%s", out)
	assert.Equal(t, 1, strings.Count(out, "\ncascade-image-1mb "), "the cascade summary has the cascade cell:\n%s", out)
	assert.Contains(t, out, "4.50x", "cascade TTFB p50 ratio")
	assert.Contains(t, out, "6.00x", "cascade CPU ratio")

	w.Reset()
	writeSummary(&w, []*cell{cascade})
	writeCascadeSummary(&w, []*cell{hop})
	assert.Empty(t, w.String(), "no summary without its cells")
}

func TestCascadeRatios(t *testing.T) {
	t.Parallel()
	r := cascadeRatiosOf(testCell("x", true, [2]int{1000, 2000}, [2]int{6000, 9000}))
	assert.Equal(t, cascadeRatios{ttfbP50: "4.50x", ttfbP99: "4.50x", cpu: "6.00x", cpuAdded: "5000.0", sim: "6.00x"}, r)

	r = cascadeRatiosOf(testCell("x", true, [2]int{0, 0}, [2]int{6000, 9000}))
	assert.Equal(t, "-", r.cpu, "no ratio over zero")

	aborted := testCell("x", true)
	aborted.Err = "boom"
	assert.Equal(t, "-", cascadeRatiosOf(aborted).ttfbP50)
}

func TestLogLine(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "coordinator.log")
	require.NoError(t, os.WriteFile(log, []byte(
		`{"level":"WARN","msg":"request failed","request_id":"id-1","error":"step \"render\": boom"}`+"\n"+
			`{"level":"WARN","msg":"request failed","request_id":"id-2","error":"step \"conditional-decode\": conditional-decode: read answer: unexpected EOF"}`+"\n"), 0o600))
	p := &procs.Process{Name: "coordinator-cascade", Log: log}

	line, err := logLine(t.Context(), p, "id-2", conditionalDecodeStep, 0)
	require.NoError(t, err)
	assert.Equal(t, `step "conditional-decode": conditional-decode: read answer: unexpected EOF`, logError(line))

	_, err = logLine(t.Context(), p, "id-1", conditionalDecodeStep, 0)
	assert.Error(t, err, "another step's failure")
	_, err = logLine(t.Context(), p, "", conditionalDecodeStep, 0)
	assert.Error(t, err, "no request id")
	assert.Equal(t, "plain text", logError("plain text"))
}
