package steps_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps"
)

// recordStep appends its name to a shared log and returns err.
type recordStep struct {
	name string
	log  *[]string
	err  error
}

func (s *recordStep) Execute(context.Context, *steps.RequestContext) error {
	*s.log = append(*s.log, s.name)
	return s.err
}

func plugin(typ string, log *[]string, err error, got *map[string]any) steps.Plugin {
	return steps.Plugin{Type: typ, New: func(p map[string]any) (steps.Step, error) {
		if got != nil {
			*got = p
		}
		return &recordStep{name: typ, log: log, err: err}, nil
	}}
}

func TestPipelineRunsStepsInConfigOrder(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{plugin("a", &log, nil, nil), plugin("b", &log, nil, nil), plugin("c", &log, nil, nil)}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "c"}, {Type: "a"}, {Type: "b"}}, steps.Defaults{})
	require.NoError(t, err)
	rc := &steps.RequestContext{}
	require.NoError(t, p.Run(context.Background(), rc))
	assert.Equal(t, []string{"c", "a", "b"}, log)
	assert.Equal(t, []string{"c", "a", "b"}, p.Names())
	require.Len(t, rc.Timings, 3)
	assert.Equal(t, "c", rc.Timings[0].Step)
	for _, tm := range rc.Timings {
		assert.Equal(t, steps.OutcomeOK, tm.Outcome)
	}
}

func TestPipelineStopsAtDoneAndAtErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name     string
		err      error
		wantErr  error
		outcomes []steps.Outcome
	}{
		{name: "done ends successfully", err: steps.ErrDone, outcomes: []steps.Outcome{steps.OutcomeDoneEarly, steps.OutcomeSkipped}},
		{name: "error ends with the step named", err: boom, wantErr: boom, outcomes: []steps.Outcome{steps.OutcomeError, steps.OutcomeSkipped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var log []string
			plugins := []steps.Plugin{plugin("first", &log, tt.err, nil), plugin("second", &log, nil, nil)}
			p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "first"}, {Type: "second"}}, steps.Defaults{})
			require.NoError(t, err)
			rc := &steps.RequestContext{}
			err = p.Run(context.Background(), rc)
			assert.Equal(t, []string{"first"}, log, "the second step must not run")
			require.Len(t, rc.Timings, 2)
			assert.Equal(t, tt.outcomes, []steps.Outcome{rc.Timings[0].Outcome, rc.Timings[1].Outcome})
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), `step "first"`)
		})
	}
}

func TestPipelineHonoursCancellation(t *testing.T) {
	t.Parallel()
	var log []string
	p, err := steps.NewPipeline([]steps.Plugin{plugin("a", &log, nil, nil)}, []steps.StepConfig{{Type: "a"}}, steps.Defaults{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rc := &steps.RequestContext{}
	err = p.Run(ctx, rc)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, log)
	assert.Equal(t, []steps.Timing{{Step: "a", Outcome: steps.OutcomeSkipped}}, rc.Timings)
}

func TestNewPipelineErrors(t *testing.T) {
	t.Parallel()
	var log []string
	bad := steps.Plugin{Type: "bad", New: func(map[string]any) (steps.Step, error) {
		return nil, errors.New("max_parallel: expected integer, got 8.5")
	}}
	tests := []struct {
		name    string
		plugins []steps.Plugin
		configs []steps.StepConfig
		want    string
	}{
		{name: "unknown type lists known ones sorted", plugins: []steps.Plugin{plugin("zeta", &log, nil, nil), plugin("alpha", &log, nil, nil)},
			configs: []steps.StepConfig{{Type: "nope"}}, want: "unknown step type: nope (known: alpha, zeta)"},
		{name: "duplicate registration", plugins: []steps.Plugin{plugin("a", &log, nil, nil), plugin("a", &log, nil, nil)},
			configs: []steps.StepConfig{{Type: "a"}}, want: `step type "a" registered twice`},
		{name: "bad params name the step", plugins: []steps.Plugin{bad}, configs: []steps.StepConfig{{Type: "bad"}},
			want: "pipeline.steps[0] (bad): max_parallel: expected integer, got 8.5"},
		{name: "empty pipeline", plugins: []steps.Plugin{bad}, want: "at least one step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := steps.NewPipeline(tt.plugins, tt.configs, steps.Defaults{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestNewPipelineInjectsDefaultsWithoutOverriding(t *testing.T) {
	t.Parallel()
	var log []string
	var got map[string]any
	own := map[string]any{"kv_connector": "kv-sglang", "max_parallel": 4}
	p := plugin("encode", &log, nil, &got)
	_, err := steps.NewPipeline([]steps.Plugin{p}, []steps.StepConfig{{Type: "encode", Params: own}},
		steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"kv_connector": "kv-sglang", "ec_connector": "ec-nixl", "use_openai_format": true, "max_parallel": 4}, got)
	assert.NotContains(t, own, "ec_connector", "the config's map must not be mutated")
}
