package builtin_test

import (
	"context"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// newRender builds a render step for address with extra params.
func newRender(t *testing.T, address string, extra map[string]any) steps.Step {
	t.Helper()
	p := map[string]any{"address": address}
	maps.Copy(p, extra)
	step, err := builtin.NewRenderPlugin(builtin.RenderDeps{}).New(p)
	require.NoError(t, err)
	t.Cleanup(step.(*builtin.Render).Close)
	return step
}

func TestRenderParams(t *testing.T) {
	t.Parallel()
	const addr = "http://127.0.0.1:8000"
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{name: "address alone takes the defaults", params: map[string]any{"address": addr}},
		{name: "https address with a path", params: map[string]any{"address": "https://render.svc:8443/base/"}},
		{name: "every key", params: map[string]any{"address": addr, "timeout": "5s", "max_idle_conns_per_host": 0,
			"idle_conn_timeout": "1m", "max_total_tokens": 8192, "max_total_placeholder_tokens": int64(4096)}},
		{name: "integral float limit", params: map[string]any{"address": addr, "max_total_tokens": 8192.0, "max_total_placeholder_tokens": 10.0}},
		{name: "zero means unlimited", params: map[string]any{"address": addr, "max_total_tokens": 0, "max_total_placeholder_tokens": 0}},
		{name: "zero timeout means none", params: map[string]any{"address": addr, "timeout": "0s"}},
		{name: "connect timeout and retry", params: map[string]any{"address": addr, "connect_timeout": "2s",
			"retry": map[string]any{"max_attempts": 1, "initial_backoff": "10ms", "max_backoff": "10ms"}}},
		{name: "retry keeps its other defaults", params: map[string]any{"address": addr, "retry": map[string]any{"max_attempts": 5}}},
		{name: "injected pipeline keys", params: map[string]any{"address": addr, "use_openai_format": false, "kv_connector": "kv-nixl", "ec_connector": "ec-nixl"}},

		{name: "missing address", params: map[string]any{}, wantErr: "address: required"},
		{name: "nil params", params: nil, wantErr: "address: required"},
		{name: "empty address", params: map[string]any{"address": ""}, wantErr: "address: required"},
		{name: "address not a string", params: map[string]any{"address": 8000}, wantErr: "address: expected string, got int"},
		{name: "address without scheme", params: map[string]any{"address": "localhost:8000"}, wantErr: `address: must be an http(s) URL with a host, got "localhost:8000"`},
		{name: "address with another scheme", params: map[string]any{"address": "ftp://render:21"}, wantErr: "address: must be an http(s) URL"},
		{name: "address without host", params: map[string]any{"address": "http://"}, wantErr: "address: must be an http(s) URL"},
		{name: "unparsable address", params: map[string]any{"address": "http://[::1"}, wantErr: "address: must be an http(s) URL"},
		{name: "timeout without unit", params: map[string]any{"address": addr, "timeout": "30"}, wantErr: `timeout: expected a duration string like "30s", got "30"`},
		{name: "timeout as a number", params: map[string]any{"address": addr, "timeout": 30}, wantErr: "timeout: expected a duration string"},
		{name: "negative timeout", params: map[string]any{"address": addr, "timeout": "-1s"}, wantErr: "timeout: must not be negative, got -1s"},
		{name: "idle_conn_timeout unparsable", params: map[string]any{"address": addr, "idle_conn_timeout": "soon"}, wantErr: "idle_conn_timeout: expected a duration string"},
		{name: "negative idle_conn_timeout", params: map[string]any{"address": addr, "idle_conn_timeout": "-5s"}, wantErr: "idle_conn_timeout: must not be negative"},
		{name: "negative max_idle_conns_per_host", params: map[string]any{"address": addr, "max_idle_conns_per_host": -1}, wantErr: "max_idle_conns_per_host: must not be negative, got -1"},
		{name: "max_idle_conns_per_host as a string", params: map[string]any{"address": addr, "max_idle_conns_per_host": "100"}, wantErr: "max_idle_conns_per_host: expected number, got string"},
		{name: "fractional max_total_tokens", params: map[string]any{"address": addr, "max_total_tokens": 8192.5}, wantErr: "max_total_tokens: expected integer, got 8192.5"},
		{name: "max_total_tokens as a string", params: map[string]any{"address": addr, "max_total_tokens": "30"}, wantErr: "max_total_tokens: expected number, got string"},
		{name: "negative max_total_tokens", params: map[string]any{"address": addr, "max_total_tokens": -1}, wantErr: "max_total_tokens: must not be negative, got -1"},
		{name: "negative max_total_placeholder_tokens", params: map[string]any{"address": addr, "max_total_placeholder_tokens": -1}, wantErr: "max_total_placeholder_tokens: must not be negative, got -1"},
		{name: "max_total_placeholder_tokens as a bool", params: map[string]any{"address": addr, "max_total_placeholder_tokens": true}, wantErr: "max_total_placeholder_tokens: expected number, got bool"},
		{name: "out of range limit", params: map[string]any{"address": addr, "max_total_tokens": 1e300}, wantErr: "max_total_tokens: out of range"},
		{name: "unknown key", params: map[string]any{"address": addr, "bogus": 1}, wantErr: `unknown key "bogus"`},
		{name: "zero connect_timeout", params: map[string]any{"address": addr, "connect_timeout": "0s"}, wantErr: "connect_timeout: must be positive, got 0s"},
		{name: "negative retry.max_attempts", params: map[string]any{"address": addr, "retry": map[string]any{"max_attempts": -1}}, wantErr: "retry.max_attempts: must not be negative, got -1"},
		{name: "retry.max_backoff below initial", params: map[string]any{"address": addr, "retry": map[string]any{"initial_backoff": "2s"}}, wantErr: "retry.max_backoff: must not be below initial_backoff (2s), got 1s"},
		{name: "unknown retry key", params: map[string]any{"address": addr, "retry": map[string]any{"jitter": true}}, wantErr: `retry: unknown key "jitter"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewRenderPlugin(builtin.RenderDeps{}).New(tt.params)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			step.(*builtin.Render).Close()
		})
	}
}

// TestRenderFloatLimitApplies checks that an integral float limit is the
// limit, not just accepted.
func TestRenderFloatLimitApplies(t *testing.T) {
	t.Parallel()
	step := newRender(t, "http://127.0.0.1:1", map[string]any{"max_total_tokens": 2.0})
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Body: []byte(`{"prompt":[1,2,3]}`)}
	err := step.Execute(context.Background(), rc)
	require.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.Contains(t, err.Error(), "too many total tokens: got 3, max 2")
}
