package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

func TestReportPrefill(t *testing.T) {
	t.Parallel()
	ran := []steps.Timing{{Step: builtin.PrefillType, Outcome: steps.OutcomeOK}, {Step: builtin.DecodeType, Outcome: steps.OutcomeOK}}
	notReached := []steps.Timing{{Step: builtin.PrefillType, Outcome: steps.OutcomeOK}, {Step: builtin.DecodeType, Outcome: steps.OutcomeSkipped}}
	cancelled := errors.New("pipeline cancelled: context canceled")
	tests := []struct {
		name      string
		rc        steps.RequestContext
		err       error
		fallbacks float64
		log       string // a line the log must hold; "" for no log at all
	}{
		{name: "fallback", rc: steps.RequestContext{RequestID: "r1", Timings: ran, PD: pd.State{Fallback: &pd.Fallback{Reason: pd.FallbackStatus5xx, Err: errors.New("prefill: upstream answered HTTP 500")}}},
			fallbacks: 1, log: `level=WARN msg="prefill failed, decode serves the request alone" request_id=r1 reason=status_5xx error="prefill: upstream answered HTTP 500"`},
		{name: "fallback after an answer without the KV params (D26)", rc: steps.RequestContext{RequestID: "r6", Timings: ran, PD: pd.State{Fallback: &pd.Fallback{Reason: pd.FallbackMissingKVParams,
			Err: &pd.IncompleteKVError{Leg: "prefill", StatusCode: 200, Connector: "kv-nixl", Missing: []string{"remote_host"}}}}},
			fallbacks: 1, log: `level=WARN msg="prefill failed, decode serves the request alone" request_id=r6 reason=missing_kv_params ` +
				`error="prefill: answer lacks kv_transfer_params remote_host (kv-nixl)"`},
		{name: "client left between prefill and decode", rc: steps.RequestContext{RequestID: "r2", Timings: notReached, PD: pd.State{Done: true}},
			err: cancelled, log: `level=INFO msg="request ended between prefill and decode; the prefill worker's timeout frees its KV blocks" request_id=r2`},
		{name: "served", rc: steps.RequestContext{RequestID: "r3", Timings: ran, PD: pd.State{Done: true}}},
		{name: "failed in decode", rc: steps.RequestContext{RequestID: "r4",
			Timings: []steps.Timing{{Step: builtin.PrefillType}, {Step: builtin.DecodeType, Outcome: steps.OutcomeError}}, PD: pd.State{Done: true, DecodeSent: true}}, err: cancelled},
		{name: "failed before prefill", rc: steps.RequestContext{RequestID: "r5", Timings: notReached}, err: cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			m := metrics.New()
			c := NewCoordinator(nil, m, slog.New(slog.NewTextHandler(&logs, nil)), config.Default(), &legids.Registry{})
			c.reportPrefill(context.Background(), &tt.rc, tt.err)

			families, err := m.Gatherer().Gather()
			require.NoError(t, err)
			var got float64
			for _, f := range families {
				if f.GetName() == "coordinator_prefill_fallbacks_total" {
					for _, series := range f.GetMetric() {
						got += series.GetCounter().GetValue()
					}
				}
			}
			assert.InDelta(t, tt.fallbacks, got, 0)
			if tt.log == "" {
				assert.Empty(t, logs.String())
			} else {
				assert.Contains(t, logs.String(), tt.log)
			}
		})
	}
}
