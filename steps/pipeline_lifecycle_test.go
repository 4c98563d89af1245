package steps_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
)

// lifecycleStep records its Start and Stop in a shared log; startErr and
// stopErr are what they return.
type lifecycleStep struct {
	recordStep
	startErr, stopErr error
}

func (s *lifecycleStep) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return s.startErr
}

func (s *lifecycleStep) Stop(context.Context) error {
	*s.log = append(*s.log, "stop "+s.name)
	return s.stopErr
}

// stopOnly has a Stop and no Start.
type stopOnly struct{ recordStep }

func (s *stopOnly) Stop(context.Context) error {
	*s.log = append(*s.log, "stop "+s.name)
	return nil
}

// firstStep must run first.
type firstStep struct{ recordStep }

func (firstStep) RunsFirst() {}

// holder holds requests whose X-Hold header is "yes".
type holder struct{ recordStep }

func (holder) Holds(h headers.Forwarded) bool { return h.Get("X-Hold") == "yes" }

func stepPlugin(typ string, s steps.Step) steps.Plugin {
	return steps.Plugin{Type: typ, New: func(map[string]any) (steps.Step, error) { return s, nil }}
}

func TestPipelineStartsInOrderAndStopsInReverse(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{
		stepPlugin("a", &lifecycleStep{recordStep: recordStep{name: "a", log: &log}}),
		stepPlugin("b", &recordStep{name: "b", log: &log}),
		stepPlugin("c", &stopOnly{recordStep{name: "c", log: &log}}),
		stepPlugin("d", &lifecycleStep{recordStep: recordStep{name: "d", log: &log}, stopErr: errors.New("stuck")}),
	}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "a"}, {Type: "b"}, {Type: "c"}, {Type: "d"}}, steps.Defaults{})
	require.NoError(t, err)
	assert.Empty(t, log, "building starts nothing")

	require.NoError(t, p.Start(t.Context()))
	assert.Equal(t, []string{"start a", "start d"}, log)
	log = nil
	err = p.Stop(t.Context())
	assert.Equal(t, []string{"stop d", "stop c", "stop a"}, log, "every step stops, after a failing one too")
	assert.EqualError(t, err, `step "d": stop: stuck`)
}

func TestPipelineFailedStartStopsWhatStarted(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{
		stepPlugin("a", &lifecycleStep{recordStep: recordStep{name: "a", log: &log}}),
		stepPlugin("b", &stopOnly{recordStep{name: "b", log: &log}}),
		stepPlugin("c", &lifecycleStep{recordStep: recordStep{name: "c", log: &log}, startErr: errors.New("redis down")}),
		stepPlugin("d", &lifecycleStep{recordStep: recordStep{name: "d", log: &log}}),
	}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "a"}, {Type: "b"}, {Type: "c"}, {Type: "d"}}, steps.Defaults{})
	require.NoError(t, err)
	require.EqualError(t, p.Start(t.Context()), "pipeline.steps[2] (c): redis down")
	assert.Equal(t, []string{"start a", "start c", "stop b", "stop a"}, log, "the failed step and those after it are not stopped")
	log = nil
	require.NoError(t, p.Stop(t.Context()))
	assert.Empty(t, log, "a failed start left nothing to stop")
}

func TestPipelineNeverStartedStopsNothing(t *testing.T) {
	t.Parallel()
	var log []string
	p, err := steps.NewPipeline([]steps.Plugin{stepPlugin("a", &lifecycleStep{recordStep: recordStep{name: "a", log: &log}})},
		[]steps.StepConfig{{Type: "a"}}, steps.Defaults{})
	require.NoError(t, err)
	require.NoError(t, p.Stop(t.Context()))
	assert.Empty(t, log)
}

func TestPipelineFirstStepMustBeFirst(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{stepPlugin("gate", &firstStep{recordStep{name: "gate", log: &log}}), plugin("decode", &log, nil, nil)}
	_, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "gate"}, {Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	_, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: "decode"}, {Type: "gate"}}, steps.Defaults{})
	require.EqualError(t, err, "pipeline.steps[1]: gate must be the first step")
	_, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: "gate"}, {Type: "gate"}}, steps.Defaults{})
	require.EqualError(t, err, "pipeline.steps[1]: gate must be the first step", "twice is not first twice")
}

func TestPipelineHoldsAsksItsHolders(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{stepPlugin("hold", &holder{recordStep{name: "hold", log: &log}}), plugin("decode", &log, nil, nil)}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	assert.False(t, p.Holds(headers.NewForwarded("X-Hold", "yes")), "no holder")
	p, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: "hold"}, {Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	assert.True(t, p.Holds(headers.NewForwarded("X-Hold", "yes")))
	assert.False(t, p.Holds(headers.NewForwarded("X-Hold", "no")))
}

func TestPipelineRequestStoreIsFound(t *testing.T) {
	t.Parallel()
	var log []string
	plugins := []steps.Plugin{stepPlugin("store", &memStore{recordStep{name: "store", log: &log}}), plugin("decode", &log, nil, nil)}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	store, name := p.RequestStore()
	assert.Nil(t, store)
	assert.Empty(t, name)
	p, err = steps.NewPipeline(plugins, []steps.StepConfig{{Type: "store"}, {Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	store, name = p.RequestStore()
	require.NotNil(t, store)
	assert.Equal(t, "store", name)
	assert.Equal(t, "x-tenant", store.TenantHeader())
}

// memStore is a RequestStore that knows no request.
type memStore struct{ recordStep }

func (memStore) TenantHeader() string { return "x-tenant" }
func (memStore) Lookup(context.Context, string, string) steps.Answer {
	return steps.Answer{Status: http.StatusGone}
}
func (memStore) Delete(context.Context, string, string) steps.Answer {
	return steps.Answer{Status: http.StatusNoContent}
}

func TestPipelineStopsAtARefusal(t *testing.T) {
	t.Parallel()
	for _, last := range []bool{false, true} {
		var log []string
		refusal := &steps.Refusal{Status: 400, Type: "invalid_request_error", Code: "INVALID_REQUEST", Message: "no"}
		plugins := []steps.Plugin{plugin("first", &log, refusal, nil), plugin("second", &log, nil, nil)}
		configs := []steps.StepConfig{{Type: "first"}, {Type: "second"}}
		want := []steps.Outcome{steps.OutcomeDoneEarly, steps.OutcomeSkipped}
		if last {
			configs, want = configs[:1], []steps.Outcome{steps.OutcomeOK}
		}
		p, err := steps.NewPipeline(plugins, configs, steps.Defaults{})
		require.NoError(t, err)
		rc := &steps.RequestContext{}
		err = p.Run(context.Background(), rc)
		var got *steps.Refusal
		require.ErrorAs(t, err, &got, "the refusal reaches the service")
		assert.Same(t, refusal, got)
		assert.Contains(t, err.Error(), `step "first"`)
		assert.Equal(t, []string{"first"}, log)
		outcomes := make([]steps.Outcome, len(rc.Timings))
		for i, tm := range rc.Timings {
			outcomes[i] = tm.Outcome
		}
		assert.Equal(t, want, outcomes, "a refusal is an answer, not a failure, in the timings (last: %v)", last)
	}
}
