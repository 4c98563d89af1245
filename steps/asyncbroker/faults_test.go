package asyncbroker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

const enqueueFailedBody = `{"error":{"message":"request could not be queued: broker unavailable","type":"api_error","code":"ENQUEUE_FAILED"}}`

// Redis goes away after startup: passthrough fails open, the queued modes
// answer 503, fetch and delete 500; once Redis is back, all works again.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	r := steptest.StartRedis(t)
	// No command retries: each call against the stopped server fails after
	// one dial (with its own retries) instead of four; behaviour is alike.
	step, err := buildBroker(t, baseParams(r.URL+"?max_retries=-1"))
	require.NoError(t, err)
	env := &brokerEnv{redis: r, rdb: r.Client(t), step: step}
	env.redis.Stop()

	ctx, cancel := context.WithCancel(t.Context())
	rc, sink := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "limited-team"})
	require.NoError(t, env.step.Execute(ctx, rc), "passthrough fails open")
	assert.Zero(t, sink.Status)
	assert.Equal(t, "interactive-reserved", rc.Header.Get("x-llm-d-inference-objective"))
	cancel()

	for _, mode := range []string{"enqueue", "wait"} {
		rc, _ := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": mode, "X-Team": "team-a"})
		r := refusalOf(t, env.step.Execute(t.Context(), rc))
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, mode)
		assert.JSONEq(t, enqueueFailedBody, refusalJSON(t, r), mode)
	}

	a := env.step.Lookup(t.Context(), "team-a", "req-test-1")
	assert.Equal(t, http.StatusInternalServerError, a.Status)
	assert.JSONEq(t, `{"error":{"message":"result lookup failed","type":"api_error","code":"LOOKUP_FAILED"}}`, answerBody(t, a))
	a = env.step.Delete(t.Context(), "team-a", "req-test-1")
	assert.Equal(t, http.StatusInternalServerError, a.Status)
	assert.JSONEq(t, `{"error":{"message":"result delete failed","type":"api_error","code":"DELETE_FAILED"}}`, answerBody(t, a))

	// Back up. go-redis fails dials fast for a moment after many failed
	// ones (it probes once a second), then reconnects.
	env.redis.Start()
	require.Eventually(t, func() bool {
		return env.step.Lookup(t.Context(), "team-a", "req-test-1").Status == http.StatusGone
	}, 10*time.Second, 20*time.Millisecond, "reconnected")
	rc, sink = brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Team": "team-a"})
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	assert.Equal(t, http.StatusAccepted, sink.Status)
	assert.Equal(t, http.StatusAccepted, env.step.Lookup(t.Context(), "team-a", "req-test-1").Status)
	n, err := env.rdb.Exists(t.Context(), "quota:userid:limited-team").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the failed-open request took no slot")
}

// The connection to Redis is cut while enqueues are in flight: whatever
// was answered 202 is in the queue; the rest were answered 503.
func TestNothingAcknowledgedIsLost(t *testing.T) {
	t.Parallel()
	r := steptest.StartRedis(t)
	rdb := r.Client(t)
	px := startProxy(t, r.Addr)
	step, err := buildBroker(t, baseParams(px.URL()))
	require.NoError(t, err)

	const inFlight, afterCut = 40, 10
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered = map[string]int{}
		accepted atomic.Int32
		cutOnce  sync.Once
	)
	enqueue := func(id string) {
		defer wg.Done()
		rc, sink := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Team": "team-a"})
		rc.RequestID = id
		err := step.Execute(context.Background(), rc)
		status := sink.Status
		var r *steps.Refusal
		switch {
		case errors.As(err, &r):
			status = r.Status
		case !isDone(err):
			return
		}
		if status == http.StatusAccepted && accepted.Add(1) == inFlight/4 {
			cutOnce.Do(px.Cut) // mid-flight: the others are still running
		}
		mu.Lock()
		answered[id] = status
		mu.Unlock()
	}
	for i := range inFlight {
		wg.Add(1)
		go enqueue(fmt.Sprint("in-flight-", i))
	}
	wg.Wait()
	cutOnce.Do(px.Cut)
	for i := range afterCut {
		wg.Add(1)
		go enqueue(fmt.Sprint("after-cut-", i))
	}
	wg.Wait()

	envs, _ := queued(t, rdb, testQueue)
	inQueue := map[string]bool{}
	for _, e := range envs {
		inQueue[e.Data.ID] = true
	}
	counts := map[int]int{}
	for id, status := range answered {
		counts[status]++
		require.Contains(t, []int{http.StatusAccepted, http.StatusServiceUnavailable}, status, id)
		if status == http.StatusAccepted {
			assert.True(t, inQueue["team-a:"+id], "%s was acknowledged but is not queued", id)
			n, err := rdb.Exists(t.Context(), "request-active:team-a:"+id).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "%s has no active marker", id)
		}
	}
	assert.Len(t, answered, inFlight+afterCut, "every request was answered")
	assert.GreaterOrEqual(t, counts[http.StatusAccepted], inFlight/4)
	assert.GreaterOrEqual(t, counts[http.StatusServiceUnavailable], afterCut)

	// Back up: the step reconnects.
	px.Restore()
	rc, sink := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Team": "team-a"})
	rc.RequestID = "after-restore"
	require.ErrorIs(t, step.Execute(t.Context(), rc), steps.ErrDone)
	assert.Equal(t, http.StatusAccepted, sink.Status)
}
