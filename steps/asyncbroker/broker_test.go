package asyncbroker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/asyncbroker"
)

const chatRequest = `{"model":"test-model", "messages":[{"role":"user","content":"hi"}], "top_k": 3}`

func TestNoModeHeaderIsNoOp(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	rc, sink := brokerRequest(t, chatRequest, map[string]string{
		"X-Team":                        "team-a",
		"x-llm-d-inference-fairness-id": "spoofed",
		"x-llm-d-inference-objective":   "self-assigned",
	})
	before := rc.Header.Clone()

	require.NoError(t, env.step.Execute(t.Context(), rc))
	assert.Zero(t, sink.Status, "nothing answered")
	assert.Equal(t, before, rc.Header, "client headers kept, fairness included")
	assert.Equal(t, chatRequest, string(rc.Body))
	keys, err := env.rdb.Keys(t.Context(), "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing in Redis")
}

func TestRejections(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	tests := []struct {
		name, body string
		header     map[string]string
		message    string
	}{
		{"unknown mode", chatRequest, map[string]string{"X-AP-Mode": "sideways"}, "unknown X-AP-Mode value"},
		{"stream in enqueue", `{"model":"test-model","stream":true}`, map[string]string{"X-AP-Mode": "enqueue"}, "stream is only supported in passthrough mode"},
		{"stream in wait", `{"model":"test-model","stream":true}`, map[string]string{"X-AP-Mode": "WAIT"}, "stream is only supported in passthrough mode"},
		{"missing model", `{"messages":[]}`, map[string]string{"X-AP-Mode": "enqueue"}, "model is required"},
		{"missing model in passthrough", `{"model":""}`, map[string]string{"X-AP-Mode": "passthrough"}, "model is required"},
		{"tenant with a colon", chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Team": "a:b"}, `X-Team must not contain ":"`},
		{"tenant with a colon in passthrough", chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "a:b"}, `X-Team must not contain ":"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, sink := brokerRequest(t, tt.body, tt.header)
			r := refusalOf(t, env.step.Execute(t.Context(), rc))
			assert.Equal(t, http.StatusBadRequest, r.Status)
			want := fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","code":"INVALID_REQUEST"}}`, tt.message)
			assert.JSONEq(t, want, refusalJSON(t, r))
			assert.Zero(t, sink.Status, "the service writes the refusal")
		})
	}
	t.Cleanup(func() {
		keys, err := env.rdb.Keys(context.Background(), "*").Result()
		assert.NoError(t, err)
		assert.Empty(t, keys, "no refusal touches Redis")
	})
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	rc, sink := brokerRequest(t, chatRequest, map[string]string{
		"X-AP-Mode":                 "Enqueue",
		"X-Team":                    "team-a",
		"X-Request-Timeout-Seconds": "120",
		"x-llm-d-slo-ttft-ms":       "800",
		"x-other":                   "not forwarded",
		"traceparent":               "00-abc-def-01",
	})
	start := time.Now()
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	assert.Equal(t, http.StatusAccepted, sink.Status)
	assert.Equal(t, "application/json", sink.ContentType)
	assert.Equal(t, `{"id":"req-test-1","status":"pending"}`, string(sink.Body))

	// The data layout of compat §7.7: the routed queue holds the envelope
	// scored by its deadline, the active marker holds its token until then.
	ctx := t.Context()
	keys, err := env.rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{testQueue, "request-active:team-a:req-test-1"}, keys)
	typ, err := env.rdb.Type(ctx, testQueue).Result()
	require.NoError(t, err)
	assert.Equal(t, "zset", typ)

	envs, scores := queued(t, env.rdb, testQueue)
	require.Len(t, envs, 1)
	e := envs[0]
	assert.Equal(t, float64(e.Data.Deadline), scores[0], "scored by the deadline")
	assert.Equal(t, "redis", e.RequestKind)
	assert.Regexp(t, `^[0-9a-f]{32}$`, e.Internal.RequestToken)
	assert.Equal(t, testQueue, e.Internal.RequestQueueName)
	assert.Equal(t, "results:req:team-a:req-test-1", e.Internal.ResultQueueName)
	assert.Equal(t, "team-a:req-test-1", e.Data.ID)
	assert.Equal(t, "/v1/chat/completions", e.Data.Endpoint)
	assert.Equal(t, map[string]string{"userid": "team-a", "traceparent": "00-abc-def-01"}, e.Data.Metadata)
	assert.Equal(t, map[string]string{"x-llm-d-slo-ttft-ms": "800"}, e.Data.Headers, "only forward_headers, never the mode header")
	assert.Equal(t, chatRequest, string(e.Data.Payload), "the client's body byte for byte")
	assert.Equal(t, testQueue, e.Data.RequestQueueName)
	assert.Equal(t, "results:req:team-a:req-test-1", e.Data.ResultQueueName)
	assert.InDelta(t, start.Unix(), e.Data.Created, 2)
	assert.InDelta(t, start.Add(120*time.Second).Unix(), e.Data.Deadline, 2)

	// The whole envelope, dynamic fields pinned, against the golden file
	// (the shape of compat §7.7's example).
	members, err := env.rdb.ZRange(ctx, testQueue, 0, -1).Result()
	require.NoError(t, err)
	goldenJSON(t, "envelope", pinEnvelope(t, members[0]))

	active, err := env.rdb.Get(ctx, "request-active:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.Equal(t, e.Internal.RequestToken, active, "the active marker holds the token")
	ttl, err := env.rdb.TTL(ctx, "request-active:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.InDelta(t, 120, ttl.Seconds(), 3, "the active marker lives until the deadline")
}

// pinEnvelope replaces an envelope's token, created and deadline with
// fixed values.
func pinEnvelope(t *testing.T, member string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(member), &m))
	m["internal"].(map[string]any)["request_token"] = "9f1c0000000000000000000000000000"
	data := m["data"].(map[string]any)
	created := data["created"].(float64)
	data["deadline"] = 1787000000 + data["deadline"].(float64) - created
	data["created"] = 1787000000
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestEnqueueDefaults(t *testing.T) {
	t.Parallel()
	env := newBroker(t, map[string]any{"routes": nil})
	rc, sink := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Llm-D-Slo-Tpot-Ms": "20"})
	start := time.Now()
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	require.Equal(t, http.StatusAccepted, sink.Status, string(sink.Body))

	envs, _ := queued(t, env.rdb, "request-sortedset")
	require.Len(t, envs, 1, "unrouted: the default queue")
	e := envs[0]
	assert.Equal(t, "default:req-test-1", e.Data.ID, "no tenant header: tenant default")
	assert.Equal(t, "results:req:default:req-test-1", e.Internal.ResultQueueName)
	assert.Equal(t, map[string]string{"userid": "default"}, e.Data.Metadata)
	assert.Equal(t, map[string]string{"x-llm-d-slo-tpot-ms": "20"}, e.Data.Headers)
	assert.InDelta(t, start.Add(time.Hour).Unix(), e.Data.Deadline, 2, "enqueue deadline defaults to an hour")
}

func TestCustomHeaders(t *testing.T) {
	t.Parallel()
	env := newBroker(t, map[string]any{
		"mode_header":      "X-Mode",
		"tenant_header":    "X-Org",
		"timeout_header":   "X-Deadline",
		"objective_header": "X-Objective",
		"fairness_header":  "X-Fair",
		"forward_headers":  []any{"X-Priority"},
		"quota":            map[string]any{"attribute": "org", "limits": map[string]any{"acme": 5}},
	})
	rc, sink := brokerRequest(t, chatRequest, map[string]string{
		"X-Mode": "enqueue", "X-Org": "acme", "X-Deadline": "30", "X-Priority": "high", "X-AP-Mode": "wait",
	})
	start := time.Now()
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	require.Equal(t, http.StatusAccepted, sink.Status)
	envs, _ := queued(t, env.rdb, testQueue)
	require.Len(t, envs, 1)
	assert.Equal(t, "acme:req-test-1", envs[0].Data.ID)
	assert.Equal(t, map[string]string{"org": "acme"}, envs[0].Data.Metadata, "the quota attribute names the tenant")
	assert.Equal(t, map[string]string{"X-Priority": "high"}, envs[0].Data.Headers, "named as configured")
	assert.InDelta(t, start.Add(30*time.Second).Unix(), envs[0].Data.Deadline, 2)

	rc, _ = brokerRequest(t, chatRequest, map[string]string{"X-Mode": "passthrough", "X-Org": "acme"})
	require.NoError(t, env.step.Execute(t.Context(), rc))
	assert.Equal(t, "interactive-reserved", rc.Header.Get("x-objective"))
	assert.Equal(t, "acme", rc.Header.Get("x-fair"))
	n, err := env.rdb.Get(t.Context(), "quota:org:acme").Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestResubmitClearsCancellation(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	require.NoError(t, env.rdb.Set(t.Context(), "request-cancel:team-a:req-test-1", "old-token", time.Hour).Err())
	rc, sink := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "enqueue", "X-Team": "team-a"})
	require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
	require.Equal(t, http.StatusAccepted, sink.Status)
	n, err := env.rdb.Exists(t.Context(), "request-cancel:team-a:req-test-1").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a resubmission does not inherit an old cancellation")
}

func TestDeadlines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		timeouts map[string]any
		header   string
		want     time.Duration
	}{
		{"no max: a huge timeout is honoured", nil, "1000000", 1000000 * time.Second},
		{"max clamps", map[string]any{"enqueue": map[string]any{"max_seconds": 300}}, "1000000", 300 * time.Second},
		{"partial entry keeps the default", map[string]any{"enqueue": map[string]any{"max_seconds": 7200}}, "", time.Hour},
		{"configured default", map[string]any{"enqueue": map[string]any{"default_seconds": 90}}, "", 90 * time.Second},
		{"the wait entry does not apply", map[string]any{"wait": map[string]any{"default_seconds": 5, "max_seconds": 10}}, "", time.Hour},
		{"zero ignored", nil, "0", time.Hour},
		{"negative ignored", nil, "-5", time.Hour},
		{"not a number ignored", nil, "soon", time.Hour},
		{"fraction ignored", nil, "1.5", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			extra := map[string]any{}
			if tt.timeouts != nil {
				extra["timeouts"] = tt.timeouts
			}
			env := newBroker(t, extra)
			rc, sink := brokerRequest(t, chatRequest, map[string]string{
				"X-AP-Mode": "enqueue", "X-Team": "team-a", "X-Request-Timeout-Seconds": tt.header,
			})
			start := time.Now()
			require.ErrorIs(t, env.step.Execute(t.Context(), rc), steps.ErrDone)
			require.Equal(t, http.StatusAccepted, sink.Status, string(sink.Body))
			envs, _ := queued(t, env.rdb, testQueue)
			require.Len(t, envs, 1)
			assert.InDelta(t, start.Add(tt.want).Unix(), envs[0].Data.Deadline, 2)
		})
	}
}

func TestPassthroughStampsAndClassifies(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	ctx := t.Context()

	// The first request of the limited tenant takes its one slot: reserved,
	// client identity headers replaced, the pipeline goes on.
	ctx1, cancel1 := context.WithCancel(ctx)
	rc1, sink1 := brokerRequest(t, chatRequest, map[string]string{
		"X-AP-Mode":                     "passthrough",
		"X-Team":                        "limited-team",
		"x-llm-d-inference-objective":   "self-assigned",
		"X-LLM-D-Inference-Fairness-Id": "spoofed",
	})
	require.NoError(t, env.step.Execute(ctx1, rc1))
	assert.Zero(t, sink1.Status)
	assert.Equal(t, "interactive-reserved", rc1.Header.Get("x-llm-d-inference-objective"))
	assert.Equal(t, "limited-team", rc1.Header.Get("x-llm-d-inference-fairness-id"))
	assert.Equal(t, chatRequest, string(rc1.Body), "body untouched")
	assert.Equal(t, "passthrough", rc1.Header.Get("x-ap-mode"))

	counter := func() int {
		n, err := env.rdb.Get(context.Background(), "quota:userid:limited-team").Int()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, 1, counter())
	ttl, err := env.rdb.TTL(ctx, "quota:userid:limited-team").Result()
	require.NoError(t, err)
	assert.InDelta(t, 300, ttl.Seconds(), 3, "the window")

	// A concurrent second one is over the limit: overflow, nothing taken.
	ctx2, cancel2 := context.WithCancel(ctx)
	rc2, _ := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "limited-team"})
	require.NoError(t, env.step.Execute(ctx2, rc2))
	assert.Equal(t, "interactive-overflow", rc2.Header.Get("x-llm-d-inference-objective"))
	assert.Equal(t, 1, counter())
	cancel2()

	// The first request ends (its pipeline returned long ago): the slot
	// comes back and a later request is reserved again.
	cancel1()
	require.Eventually(t, func() bool { return counter() == 0 }, 5*time.Second, 5*time.Millisecond)
	ctx3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	rc3, _ := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "limited-team"})
	require.NoError(t, env.step.Execute(ctx3, rc3))
	assert.Equal(t, "interactive-reserved", rc3.Header.Get("x-llm-d-inference-objective"))

	// A tenant without a limit is always reserved and counts nothing.
	rc4, _ := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "team-free"})
	require.NoError(t, env.step.Execute(ctx, rc4))
	assert.Equal(t, "interactive-reserved", rc4.Header.Get("x-llm-d-inference-objective"))
	assert.Equal(t, "team-free", rc4.Header.Get("x-llm-d-inference-fairness-id"))
	n, err := env.rdb.Exists(ctx, "quota:userid:team-free").Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	// A tier without objectives: no objective (the client's is still
	// dropped), the fairness id still stamped.
	rc5, _ := brokerRequest(t, `{"model":"other-model"}`, map[string]string{
		"X-AP-Mode": "passthrough", "x-llm-d-inference-objective": "self-assigned",
	})
	require.NoError(t, env.step.Execute(ctx, rc5))
	assert.False(t, rc5.Header.Has("x-llm-d-inference-objective"))
	assert.Equal(t, "default", rc5.Header.Get("x-llm-d-inference-fairness-id"))
}

func TestPassthroughQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	const limit, requests = 3, 24
	env := newBroker(t, map[string]any{"quota": map[string]any{"limits": map[string]any{"team-a": limit}}})
	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		classes = map[string]int{}
	)
	for range requests {
		rc, _ := brokerRequest(t, chatRequest, map[string]string{"X-AP-Mode": "passthrough", "X-Team": "team-a"})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := env.step.Execute(ctx, rc); err != nil {
				return
			}
			mu.Lock()
			classes[rc.Header.Get("x-llm-d-inference-objective")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"interactive-reserved": limit, "interactive-overflow": requests - limit}, classes)
	n, err := env.rdb.Get(t.Context(), "quota:userid:team-a").Int()
	require.NoError(t, err)
	assert.Equal(t, limit, n, "only reserved requests hold a slot")

	// Every request ends: Close waits for the releases, which give every
	// slot back.
	cancel()
	require.NoError(t, env.step.Stop(t.Context()))
	n, err = env.rdb.Get(t.Context(), "quota:userid:team-a").Int()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestHolds(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	tests := map[string]struct {
		header headers.Forwarded
		want   bool
	}{
		"wait, canonical key":    {headers.NewForwarded("X-Ap-Mode", "wait"), true},
		"wait, lowercase key":    {headers.NewForwarded("x-ap-mode", "WAIT"), true},
		"enqueue":                {headers.NewForwarded("X-Ap-Mode", "enqueue"), false},
		"passthrough":            {headers.NewForwarded("X-Ap-Mode", "passthrough"), false},
		"no mode":                {headers.Forwarded{}, false},
		"another header is wait": {headers.NewForwarded("X-Mode", "wait"), false},
	}
	for name, tt := range tests {
		assert.Equal(t, tt.want, env.step.Holds(tt.header), name)
	}
}

func TestRouteMatching(t *testing.T) {
	t.Parallel()
	env := newBroker(t, map[string]any{
		"default_queue": "dq",
		"default_tier":  "batch",
		"routes": []any{
			map[string]any{"model": "m1", "tenant": "gold", "queue": "gold-q", "tier": "interactive"},
			map[string]any{"model": "m1", "queue": "m1-q"},
			map[string]any{"tenant": "silver", "tier": "standard"},
		},
	})
	tests := []struct {
		name, model, tenant, queue, tier string
		matched                          bool
	}{
		{"model and tenant row wins", "m1", "gold", "gold-q", "interactive", true},
		{"model row for other tenants, empty tier inherits the default", "m1", "bronze", "m1-q", "batch", true},
		{"tenant-only row, empty queue inherits the default", "m2", "silver", "dq", "standard", true},
		{"unrouted: defaults", "m2", "bronze", "dq", "batch", false},
	}
	for _, tt := range tests {
		queue, tier, matched := asyncbroker.Route(env.step, tt.model, tt.tenant)
		assert.Equal(t, []any{tt.queue, tt.tier, tt.matched}, []any{queue, tier, matched}, tt.name)
	}

	wild := newBroker(t, map[string]any{"routes": []any{map[string]any{"queue": "all"}}})
	queue, tier, matched := asyncbroker.Route(wild.step, "anything", "anyone")
	assert.Equal(t, []any{"all", "", true}, []any{queue, tier, matched}, "a route without model and tenant matches all")
}

func TestUnroutedDedup(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	assert.True(t, asyncbroker.FirstUnrouted(env.step, "m"), "first occurrence")
	assert.False(t, asyncbroker.FirstUnrouted(env.step, "m"), "repeat")
	for i := 1; i < asyncbroker.MaxUnroutedModels; i++ {
		require.True(t, asyncbroker.FirstUnrouted(env.step, fmt.Sprint("model-", i)))
	}
	assert.False(t, asyncbroker.FirstUnrouted(env.step, "one-too-many"), "the set is capped")
}
