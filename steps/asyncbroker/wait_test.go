package asyncbroker_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/asyncbroker"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

var waitHeader = map[string]string{"X-AP-Mode": "wait", "X-Team": "team-a"}

// parkedSignal returns a hook for asyncbroker.SetParked and a channel
// closed the first time a wait parks (found no result, about to block).
func parkedSignal() (func(), <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }, ch
}

func TestWaitDeliversStoredResult(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	key := "results:req:team-a:req-test-1"
	require.NoError(t, env.rdb.LPush(t.Context(), key, result{StatusCode: 200, Payload: `{"object":"chat.completion"}`}.JSON(t)).Err())

	rc, sink := brokerRequest(t, chatRequest, waitHeader)
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	assert.Equal(t, http.StatusOK, sink.Status)
	assert.Equal(t, "application/json", sink.ContentType)
	assert.Equal(t, `{"object":"chat.completion"}`, string(sink.Body))
	n, err := env.rdb.Exists(t.Context(), key).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "delivered on the held connection: the mailbox is gone")
}

// A wait parks, the processor takes the queued request and writes its
// result, and the wait wakes up to deliver it: by polling, or by a
// keyspace notification alone (the backup poll is an hour).
func TestWaitWakesUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		mode     string
		notify   bool // server publishes keyspace events
		notifies bool // the step wakes on them
	}{
		{name: "poll", mode: "poll", notify: true, notifies: false},
		{name: "notify", mode: "notify", notify: true, notifies: true},
		{name: "auto with notifications on", mode: "auto", notify: true, notifies: true},
		{name: "auto with notifications off", mode: "auto", notify: false, notifies: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []steptest.RedisOption
			if tt.notify {
				opts = append(opts, steptest.WithKeyspaceNotifications("Kl"))
			}
			env := newBroker(t, map[string]any{"wakeup_mode": tt.mode}, opts...)
			require.Equal(t, tt.notifies, asyncbroker.Notifies(env.step))
			if tt.notifies {
				asyncbroker.SetPolls(env.step, time.Hour, time.Hour)
			}
			hook, parked := parkedSignal()
			asyncbroker.SetParked(env.step, hook)
			got := make(chan envelope, 1)
			startProcessor(t, env.rdb, testQueue, func(e envelope) result {
				<-parked // answer only once the wait is blocked
				got <- e
				return result{StatusCode: 200, Payload: `{"object":"chat.completion","model":"test-model"}`}
			})

			rc, sink := brokerRequest(t, chatRequest, waitHeader)
			require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
			assert.Equal(t, http.StatusOK, sink.Status)
			assert.Equal(t, `{"object":"chat.completion","model":"test-model"}`, string(sink.Body))
			assert.Equal(t, "team-a:req-test-1", (<-got).Data.ID)
			n, err := env.rdb.Exists(t.Context(), "results:req:team-a:req-test-1").Result()
			require.NoError(t, err)
			assert.Zero(t, n, "the mailbox is deleted after delivery")
		})
	}
}

func TestWaitDeliversErrorResult(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	startProcessor(t, env.rdb, testQueue, func(envelope) result {
		return result{Payload: `{"error":"Pool gating dropped request"}`, ErrorCode: "GATE_DROPPED", ErrorMessage: "Pool gating dropped request"}
	})
	rc, _ := brokerRequest(t, chatRequest, waitHeader)
	r := refusalOf(t, env.step.Execute(t.Context(), rc))
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.JSONEq(t, `{"error":{"message":"Pool gating dropped request","type":"rate_limit_error","code":"GATE_DROPPED"}}`, refusalJSON(t, r))
	n, err := env.rdb.Exists(t.Context(), "results:req:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "delivered on the held connection: the mailbox is gone")
}

func TestWaitCapFallsBackToPending(t *testing.T) {
	t.Parallel()
	env := newBroker(t, map[string]any{"wait_cap_seconds": 1})
	rc, sink := brokerRequest(t, chatRequest, waitHeader)
	start := time.Now()
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "held for the cap")
	assert.Equal(t, http.StatusAccepted, sink.Status)
	assert.Equal(t, `{"id":"req-test-1","status":"pending"}`, string(sink.Body))

	envs, _ := queued(t, env.rdb, testQueue)
	require.Len(t, envs, 1, "still queued")
	assert.InDelta(t, start.Add(time.Minute).Unix(), envs[0].Data.Deadline, 2, "the wait deadline defaults to 60 s")
	a := env.step.Lookup(t.Context(), "team-a", "req-test-1")
	assert.Equal(t, http.StatusAccepted, a.Status, "and fetchable")
}

func TestWaitDeadlineAnswersTimeout(t *testing.T) {
	t.Parallel()
	env := newBroker(t, map[string]any{"timeouts": map[string]any{"wait": map[string]any{"default_seconds": 1}}})
	rc, _ := brokerRequest(t, chatRequest, waitHeader)
	start := time.Now()
	r := refusalOf(t, env.step.Execute(t.Context(), rc))
	assert.GreaterOrEqual(t, time.Since(start), time.Second)
	assert.Equal(t, http.StatusGatewayTimeout, r.Status)
	assert.JSONEq(t, `{"error":{"message":"request deadline exceeded before a result was produced","type":"timeout_error","code":"DEADLINE_EXCEEDED"}}`, refusalJSON(t, r))
}

func TestWaitClientLeaves(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	hook, parked := parkedSignal()
	asyncbroker.SetParked(env.step, hook)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-parked
		cancel()
	}()
	rc, sink := brokerRequest(t, chatRequest, waitHeader)
	err := env.step.Execute(ctx, rc)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, sink.Status, "nothing written to a client that left")

	// The producer cancel: the active token copied to the cancel marker
	// for the processor to drop the request.
	active, err := env.rdb.Get(t.Context(), "request-active:team-a:req-test-1").Result()
	require.NoError(t, err)
	marker, err := env.rdb.Get(t.Context(), "request-cancel:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.Equal(t, active, marker)
	ttl, err := env.rdb.TTL(t.Context(), "request-cancel:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.InDelta(t, (7 * 24 * time.Hour).Seconds(), ttl.Seconds(), 5)
}

// Redis restarts (empty: no persistence) while a wait holds; the result
// the processor writes afterwards still reaches the client.
func TestWaitSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"poll", "notify"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := newBroker(t, map[string]any{"wakeup_mode": mode}, steptest.WithKeyspaceNotifications("Kl"))
			if mode == "notify" {
				// Only a notification on the resubscribed pattern can end
				// this wait in time.
				asyncbroker.SetPolls(env.step, time.Hour, time.Hour)
			}
			hook, parked := parkedSignal()
			asyncbroker.SetParked(env.step, hook)
			header := map[string]string{"X-AP-Mode": "wait", "X-Team": "team-a", "X-Request-Timeout-Seconds": "60"}
			rc, sink := brokerRequest(t, chatRequest, header)
			done := make(chan error, 1)
			go func() { done <- env.step.Execute(t.Context(), rc) }()

			<-parked
			env.redis.Stop()
			env.redis.Start()
			if mode == "notify" {
				require.Eventually(t, func() bool {
					n, err := env.rdb.PubSubNumPat(context.Background()).Result()
					return err == nil && n == 1
				}, 20*time.Second, 20*time.Millisecond, "the step resubscribes after the restart")
			}
			require.NoError(t, env.rdb.LPush(t.Context(), "results:req:team-a:req-test-1",
				result{StatusCode: 200, Payload: `{"after":"restart"}`}.JSON(t)).Err())

			require.ErrorIs(t, <-done, steps.ErrDone)
			assert.Equal(t, http.StatusOK, sink.Status)
			assert.Equal(t, `{"after":"restart"}`, string(sink.Body))
		})
	}
}
