package asyncbroker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/asyncbroker"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// testQueue is the queue the base params route "test-model" to.
const testQueue = "team-default-queue"

// brokerEnv is an async-broker step over a real Redis, with the test's own
// client of that Redis.
type brokerEnv struct {
	redis *steptest.Redis
	rdb   *redis.Client
	step  *asyncbroker.Broker
}

// baseParams mirror the reference's test step: poll wake-up, one route
// for test-model to a tiered queue, objectives for that tier, and a
// reserved concurrency of 1 for limited-team.
func baseParams(url string) map[string]any {
	return map[string]any{
		"redis_url":   url,
		"wakeup_mode": "poll",
		"routes": []any{
			map[string]any{"model": "test-model", "queue": testQueue, "tier": "interactive"},
		},
		"objectives": map[string]any{
			"interactive": map[string]any{"reserved": "interactive-reserved", "overflow": "interactive-overflow"},
		},
		"quota": map[string]any{"limits": map[string]any{"limited-team": 1}},
	}
}

// newBroker starts a Redis and builds the step on it from the base params
// with extra merged over them (a nil value deletes the key).
func newBroker(t *testing.T, extra map[string]any, opts ...steptest.RedisOption) *brokerEnv {
	t.Helper()
	r := steptest.StartRedis(t, opts...)
	params := baseParams(r.URL)
	for k, v := range extra {
		if v == nil {
			delete(params, k)
			continue
		}
		params[k] = v
	}
	step, err := buildBroker(t, params)
	require.NoError(t, err)
	return &brokerEnv{redis: r, rdb: r.Client(t), step: step}
}

// buildBroker builds the step through its plugin and starts it, as the
// app's start does; it is stopped when the test ends.
func buildBroker(t *testing.T, params map[string]any) (*asyncbroker.Broker, error) {
	t.Helper()
	b, err := newStep(params)
	if err != nil {
		return nil, err
	}
	if err := b.Start(t.Context()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, nil
}

// newStep builds the step through its plugin, unstarted: what NewPipeline
// does at startup, decoding and validating the params only.
func newStep(params map[string]any) (*asyncbroker.Broker, error) {
	s, err := asyncbroker.NewPlugin(discardLog()).New(params)
	if err != nil {
		return nil, err
	}
	return s.(*asyncbroker.Broker), nil
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// brokerRequest builds a chat request's context the way the service does:
// lowercase header keys, model and stream read from the body, request id
// req-test-1.
func brokerRequest(t *testing.T, body string, header map[string]string) (*steps.RequestContext, *steptest.Sink) {
	t.Helper()
	obj, err := jsonbody.ParseObject([]byte(body))
	require.NoError(t, err)
	rc := &steps.RequestContext{
		RequestID: "req-test-1",
		Format:    legs.FormatChat,
		Body:      []byte(body),
		Sink:      &steptest.Sink{},
	}
	if raw, ok := obj.Get("model"); ok {
		rc.Model, _ = jsonbody.String(raw)
	}
	if raw, ok := obj.Get("stream"); ok {
		rc.Stream, _ = jsonbody.Bool(raw)
	}
	for k, v := range header {
		rc.Header.Set(k, v)
	}
	return rc, rc.Sink.(*steptest.Sink)
}

// envelope is the queued message as llm-d-async reads it.
type envelope struct {
	Internal struct {
		RequestToken     string `json:"request_token"`
		RequestQueueName string `json:"request_queue_name"`
		ResultQueueName  string `json:"result_queue_name"`
	} `json:"internal"`
	RequestKind string `json:"request_kind"`
	Data        struct {
		ID               string            `json:"id"`
		Created          int64             `json:"created"`
		Deadline         int64             `json:"deadline"`
		Payload          json.RawMessage   `json:"payload"`
		Metadata         map[string]string `json:"metadata"`
		Headers          map[string]string `json:"headers"`
		Endpoint         string            `json:"endpoint"`
		RequestQueueName string            `json:"request_queue_name"`
		ResultQueueName  string            `json:"result_queue_name"`
	} `json:"data"`
}

// result is a mailbox entry as llm-d-async writes it.
type result struct {
	ID           string `json:"id"`
	StatusCode   int    `json:"status_code,omitempty"`
	Payload      string `json:"payload"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

func (r result) JSON(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return string(b)
}

// queued returns the envelopes of queue, decoded, with their scores.
func queued(t *testing.T, rdb *redis.Client, queue string) ([]envelope, []float64) {
	t.Helper()
	members, err := rdb.ZRangeWithScores(context.Background(), queue, 0, -1).Result()
	require.NoError(t, err)
	envs := make([]envelope, len(members))
	scores := make([]float64, len(members))
	for i, m := range members {
		require.NoError(t, json.Unmarshal([]byte(m.Member.(string)), &envs[i]))
		scores[i] = m.Score
	}
	return envs, scores
}

// processor is the part of the async processor the tests need: it pops
// envelopes off a queue (lowest deadline first, polling), asks answer for
// a result and LPUSHes it onto the envelope's mailbox, dropping the active
// marker, as llm-d-async does. answer may block (until the test lets it
// go on).
type processor struct {
	rdb    *redis.Client
	queue  string
	answer func(envelope) result
	stop   context.CancelFunc
	done   chan struct{}
}

func startProcessor(t *testing.T, rdb *redis.Client, queue string, answer func(envelope) result) *processor {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := &processor{rdb: rdb, queue: queue, answer: answer, stop: stop, done: make(chan struct{})}
	go p.run(ctx)
	t.Cleanup(p.Stop)
	return p
}

func (p *processor) run(ctx context.Context) {
	defer close(p.done)
	for ctx.Err() == nil {
		popped, err := p.rdb.ZPopMin(ctx, p.queue).Result()
		if err != nil || len(popped) == 0 { // idle, or Redis down or restarting
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		var env envelope
		if json.Unmarshal([]byte(popped[0].Member.(string)), &env) != nil {
			continue
		}
		res := p.answer(env)
		if res.ID == "" {
			res.ID = env.Data.ID
		}
		b, _ := json.Marshal(res)
		pipe := p.rdb.TxPipeline()
		pipe.LPush(ctx, env.Internal.ResultQueueName, b)
		pipe.Del(ctx, "request-active:"+env.Data.ID)
		_, _ = pipe.Exec(ctx)
	}
}

// Stop ends the processor and waits for it.
func (p *processor) Stop() {
	p.stop()
	<-p.done
}

// proxy is a TCP proxy to Redis whose connections a test can cut, as a
// network fault or a Redis crash would, without losing Redis's data.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the redis URL of the proxy.
func (p *proxy) URL() string { return "redis://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut closes every connection and refuses new ones until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range maps.Keys(p.conns) {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// refusalOf returns the refusal err carries; the test fails without one.
func refusalOf(t *testing.T, err error) *steps.Refusal {
	t.Helper()
	var r *steps.Refusal
	require.ErrorAs(t, err, &r, "a refusal")
	return r
}

// refusalJSON is r as the OpenAI error object the service frames it to,
// field for field (the exact bytes are service/apierror's to test):
// {"error":{"message","type","code"}}.
func refusalJSON(t *testing.T, r *steps.Refusal) string {
	t.Helper()
	type object struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	}
	b, err := json.Marshal(map[string]object{"error": {Message: r.Message, Type: r.Type, Code: r.Code}})
	require.NoError(t, err)
	return string(b)
}

// answerBody is a's body, or its refusal as refusalJSON.
func answerBody(t *testing.T, a steps.Answer) string {
	t.Helper()
	if a.Refusal != nil {
		require.Equal(t, a.Refusal.Status, a.Status, "a refusal's answer has its status")
		require.Empty(t, a.Body, "a refusal is framed by the service")
		return refusalJSON(t, a.Refusal)
	}
	return string(a.Body)
}

// isDone reports whether err is steps.ErrDone.
func isDone(err error) bool { return errors.Is(err, steps.ErrDone) }

// noop is a step that does nothing: the steps after the broker in
// pipeline tests.
type noop struct{}

func (noop) Execute(context.Context, *steps.RequestContext) error { return nil }

// plugin registers noop as step type typ.
func plugin(typ string) steps.Plugin {
	return steps.Plugin{Type: typ, New: func(map[string]any) (steps.Step, error) { return noop{}, nil }}
}
