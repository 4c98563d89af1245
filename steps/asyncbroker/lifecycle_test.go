package asyncbroker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/asyncbroker"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// brokerPipeline builds a pipeline of the broker (params at url) and
// decode.
func brokerPipeline(t *testing.T, url string) *steps.Pipeline {
	t.Helper()
	p, err := steps.NewPipeline([]steps.Plugin{asyncbroker.NewPlugin(discardLog()), plugin("decode")},
		[]steps.StepConfig{{Type: asyncbroker.Type, Params: baseParams(url)}, {Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err, "building connects to nothing")
	return p
}

// A Redis that is down at start fails the start, naming the step and the
// address; building the pipeline connected to nothing and succeeded.
func TestStartFailsWhenRedisHangsUp(t *testing.T) {
	t.Parallel()
	url := steptest.HangUpRedis(t)
	p := brokerPipeline(t, url)
	start := time.Now()
	err := p.Start(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(start), asyncbroker.StartupTimeout, "a refused session fails at once")
	want := "pipeline.steps[0] (async-broker): redis_url: redis at " + strings.TrimPrefix(url, "redis://") + " unreachable: "
	assert.True(t, strings.HasPrefix(err.Error(), want), err.Error())
	assert.NotContains(t, err.Error(), "\n")
	require.NoError(t, p.Stop(t.Context()), "nothing started, nothing to stop")
}

// A Redis that accepts and never answers fails the start at the startup
// bound, not after go-redis's read timeouts and retries.
func TestStartIsBoundedWhenRedisIsSilent(t *testing.T) {
	t.Parallel()
	url := steptest.SilentRedis(t)
	b, err := newStep(baseParams(url))
	require.NoError(t, err)
	const bound = 300 * time.Millisecond
	asyncbroker.SetStartupTimeout(b, bound)
	start := time.Now()
	err = b.Start(t.Context())
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "redis_url: redis at "+strings.TrimPrefix(url, "redis://")+" unreachable: ")
	assert.GreaterOrEqual(t, elapsed, bound)
	assert.Less(t, elapsed, bound+2*time.Second, "no read timeout (3 s) nor retry on top of the bound")
}

func TestPipelineStoreStartAndStop(t *testing.T) {
	t.Parallel()
	r := steptest.StartRedis(t)
	rdb := r.Client(t)
	p, err := steps.NewPipeline([]steps.Plugin{plugin("decode")}, []steps.StepConfig{{Type: "decode"}}, steps.Defaults{})
	require.NoError(t, err)
	store, name := p.RequestStore()
	assert.Nil(t, store, "no broker, no store")
	assert.Empty(t, name)
	assert.False(t, p.Holds(headers.NewForwarded("X-Ap-Mode", "wait")), "no broker, nothing held")

	p = brokerPipeline(t, r.URL)
	store, name = p.RequestStore()
	require.NotNil(t, store)
	assert.Equal(t, asyncbroker.Type, name)
	assert.Equal(t, "x-team", store.TenantHeader())
	assert.True(t, p.Holds(headers.NewForwarded("X-Ap-Mode", "wait")), "the pipeline asks its holders")
	assert.Zero(t, stepConnections(t, rdb), "building opens no connection")

	require.NoError(t, p.Start(t.Context()))
	assert.Positive(t, stepConnections(t, rdb))
	require.NoError(t, p.Stop(t.Context()))
	assert.Eventually(t, func() bool { return stepConnections(t, rdb) == 0 }, 5*time.Second, 10*time.Millisecond,
		"Stop closes the step's connections")
	require.NoError(t, p.Stop(t.Context()), "stopping twice is harmless")
}

// failingStart is a step whose Start fails.
type failingStart struct{ noop }

func (failingStart) Start(context.Context) error { return errors.New("boom") }

func TestFailedStartStopsTheBroker(t *testing.T) {
	t.Parallel()
	r := steptest.StartRedis(t)
	rdb := r.Client(t)
	failing := steps.Plugin{Type: "failing", New: func(map[string]any) (steps.Step, error) {
		return failingStart{}, nil
	}}
	p, err := steps.NewPipeline([]steps.Plugin{asyncbroker.NewPlugin(discardLog()), failing},
		[]steps.StepConfig{{Type: asyncbroker.Type, Params: baseParams(r.URL)}, {Type: "failing"}}, steps.Defaults{})
	require.NoError(t, err)
	require.EqualError(t, p.Start(t.Context()), "pipeline.steps[1] (failing): boom")
	assert.Eventually(t, func() bool { return stepConnections(t, rdb) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the broker started before the failure was stopped")
}

func TestMustBeFirst(t *testing.T) {
	t.Parallel()
	plugins := []steps.Plugin{asyncbroker.NewPlugin(discardLog()), plugin("decode")}
	_, err := steps.NewPipeline(plugins, []steps.StepConfig{
		{Type: "decode"}, {Type: asyncbroker.Type, Params: baseParams("redis://127.0.0.1:1")},
	}, steps.Defaults{})
	require.EqualError(t, err, "pipeline.steps[1]: async-broker must be the first step")

	_, err = steps.NewPipeline(plugins, []steps.StepConfig{
		{Type: asyncbroker.Type, Params: baseParams("redis://127.0.0.1:1")},
		{Type: asyncbroker.Type, Params: baseParams("redis://127.0.0.1:1")},
	}, steps.Defaults{})
	require.EqualError(t, err, "pipeline.steps[1]: async-broker must be the first step", "twice is not first twice")
}

// stepConnections counts the server's client connections other than the
// test's own.
func stepConnections(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := rdb.ClientList(ctx).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if line != "" && !strings.Contains(line, " cmd=client|list") {
			n++
		}
	}
	return n
}
