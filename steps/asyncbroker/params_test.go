package asyncbroker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Invalid params fail when the step is built, which connects to nothing:
// these need no Redis.
func TestParamsRejected(t *testing.T) {
	t.Parallel()
	const url = "redis://127.0.0.1:1"
	tests := []struct {
		name    string
		mutate  func(map[string]any)
		wantErr string
	}{
		{"missing redis_url", func(p map[string]any) { delete(p, "redis_url") }, "redis_url is required"},
		{"empty redis_url", func(p map[string]any) { p["redis_url"] = "" }, "redis_url is required"},
		{"redis_url not a redis URL", func(p map[string]any) { p["redis_url"] = "http://host:6379" }, "redis_url: "},
		{"bad wakeup_mode", func(p map[string]any) { p["wakeup_mode"] = "sometimes" }, `wakeup_mode must be auto, notify or poll, got "sometimes"`},
		{"unknown key", func(p map[string]any) { p["bogus_key"] = true }, `unknown key "bogus_key"`},
		{"unknown nested key", func(p map[string]any) {
			p["quota"] = map[string]any{"limitz": map[string]any{}}
		}, `quota: unknown key "limitz"`},
		{"forward_headers holds the mode header", func(p map[string]any) { p["forward_headers"] = []any{"x-ap-mode"} }, "forward_headers must not include x-ap-mode"},
		{"forward_headers holds a custom mode header", func(p map[string]any) {
			p["mode_header"] = "X-Mode"
			p["forward_headers"] = []any{"X-MODE"}
		}, "forward_headers must not include X-MODE"},
		{"forward_headers holds the fairness header", func(p map[string]any) {
			p["forward_headers"] = []any{"X-LLM-D-Inference-Fairness-Id"}
		}, "forward_headers must not include X-LLM-D-Inference-Fairness-Id"},
		{"forward_headers holds the objective header", func(p map[string]any) {
			p["forward_headers"] = []any{"x-llm-d-inference-objective"}
		}, "forward_headers must not include x-llm-d-inference-objective"},
		{"timeouts keyed by passthrough", func(p map[string]any) {
			p["timeouts"] = map[string]any{"passthrough": map[string]any{"max_seconds": 5}}
		}, `timeouts: keys must be enqueue or wait, got "passthrough"`},
		{"negative timeout", func(p map[string]any) {
			p["timeouts"] = map[string]any{"wait": map[string]any{"default_seconds": -5}}
		}, "timeouts.wait: seconds must not be negative"},
		{"default over max", func(p map[string]any) {
			p["timeouts"] = map[string]any{"enqueue": map[string]any{"default_seconds": 600, "max_seconds": 300}}
		}, "timeouts.enqueue: default_seconds 600 exceeds max_seconds 300"},
		{"unknown timeouts field", func(p map[string]any) {
			p["timeouts"] = map[string]any{"wait": map[string]any{"default": 5}}
		}, `timeouts.wait: unknown key "default"`},
		{"negative wait_cap_seconds", func(p map[string]any) { p["wait_cap_seconds"] = -1 }, "wait_cap_seconds must not be negative, got -1"},
		{"negative fetch_grace_seconds", func(p map[string]any) { p["fetch_grace_seconds"] = -1 }, "fetch_grace_seconds must not be negative, got -1"},
		{"negative quota window", func(p map[string]any) {
			p["quota"] = map[string]any{"window_seconds": -60}
		}, "quota.window_seconds must not be negative, got -60"},
		{"negative quota limit", func(p map[string]any) {
			p["quota"] = map[string]any{"limits": map[string]any{"team-a": -1}}
		}, "quota.limits.team-a must not be negative, got -1"},
		{"wait_cap_seconds as a string", func(p map[string]any) { p["wait_cap_seconds"] = "5" }, "wait_cap_seconds: expected number, got string"},
		{"fractional seconds", func(p map[string]any) { p["fetch_grace_seconds"] = 1.5 }, "fetch_grace_seconds: expected integer, got 1.5"},
		{"routes not a list", func(p map[string]any) { p["routes"] = "q" }, "routes: expected a list, got string"},
		{"route with an unknown key", func(p map[string]any) {
			p["routes"] = []any{map[string]any{"model": "m", "priority": 1}}
		}, `routes[0]: unknown key "priority"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := baseParams(url)
			tt.mutate(params)
			_, err := newStep(params)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestAcceptsInjectedKeys(t *testing.T) {
	t.Parallel()
	r := steptest.StartRedis(t)
	params := baseParams(r.URL)
	params["kv_connector"] = "kv-shared-storage"
	params["ec_connector"] = "ec-shared-storage"
	params["use_openai_format"] = true
	_, err := buildBroker(t, params)
	require.NoError(t, err)
}
