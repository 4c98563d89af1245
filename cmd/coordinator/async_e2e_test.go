package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// brokerPipeline is async-broker in front of decode, on the Redis at URL.
const brokerPipeline = `
pipeline:
  steps:
    - type: async-broker
      params:
        redis_url: "REDIS_URL"
        wakeup_mode: auto
    - type: decode
`

const asyncChat = `{"model":"sim-model","messages":[{"role":"user","content":"Hello!"}],"max_tokens":5}`

// startBrokerStack starts a Redis (with keyspace notifications), the
// simulator and the coordinator with brokerPipeline, with env overrides.
func startBrokerStack(t *testing.T, env map[string]string) (*stack, *redis.Client) {
	t.Helper()
	r := steptest.StartRedis(t, steptest.WithKeyspaceNotifications("Kl"))
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStackEnv(t, env, gw, "", strings.ReplaceAll(brokerPipeline, "REDIS_URL", r.URL))
	return st, r.Client(t)
}

// apProcessor plays the async processor: it pops queued envelopes (once
// released), dispatches each payload back to the coordinator without the
// mode header (so the broker lets it through to decode) and LPUSHes the
// answer onto the envelope's mailbox.
type apProcessor struct {
	release chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
	errs    chan error
}

func startAPProcessor(t *testing.T, st *stack, rdb *redis.Client, delay time.Duration) *apProcessor {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	p := &apProcessor{release: make(chan struct{}), stop: stop, done: make(chan struct{}), errs: make(chan error, 16)}
	go func() {
		defer close(p.done)
		select {
		case <-p.release:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil {
			popped, err := rdb.ZPopMin(ctx, "request-sortedset").Result()
			if err != nil || len(popped) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			if err := p.dispatch(ctx, st, rdb, popped[0].Member.(string), delay); err != nil {
				p.errs <- err
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-p.done
		close(p.errs)
		for err := range p.errs {
			t.Errorf("processor: %v", err)
		}
	})
	return p
}

// Release lets the processor start popping.
func (p *apProcessor) Release() { close(p.release) }

func (p *apProcessor) dispatch(ctx context.Context, st *stack, rdb *redis.Client, member string, delay time.Duration) error {
	var env struct {
		Internal struct {
			ResultQueueName string `json:"result_queue_name"`
		} `json:"internal"`
		Data struct {
			ID       string            `json:"id"`
			Payload  json.RawMessage   `json:"payload"`
			Headers  map[string]string `json:"headers"`
			Endpoint string            `json:"endpoint"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(member), &env); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.restURL+env.Data.Endpoint, bytes.NewReader(env.Data.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range env.Data.Headers {
		req.Header.Set(k, v)
	}
	resp, err := st.client.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if delay > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	res, _ := json.Marshal(map[string]any{"id": env.Data.ID, "status_code": resp.StatusCode, "payload": string(body)})
	pipe := rdb.TxPipeline()
	pipe.LPush(ctx, env.Internal.ResultQueueName, res)
	pipe.Del(ctx, "request-active:"+env.Data.ID)
	_, err = pipe.Exec(ctx)
	return err
}

func (s *stack) do(t *testing.T, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.restURL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp, readAll(t, resp.Body)
}

const goneBody = `{"error":{"message":"request id is unknown, expired, or already deleted","type":"invalid_request_error","code":"UNKNOWN_REQUEST"}}`

func TestAsyncEnqueueFetchDeleteREST(t *testing.T) {
	t.Parallel()
	st, rdb := startBrokerStack(t, nil)
	ap := startAPProcessor(t, st, rdb, 0)
	team := http.Header{"X-Team": {"team-e2e"}}

	resp := st.post(t, "/v1/chat/completions", asyncChat, http.Header{
		"X-Ap-Mode": {"enqueue"}, "X-Team": {"team-e2e"}, "X-Request-Id": {"job-rest-1"},
	})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "job-rest-1", resp.Header.Get("X-Request-Id"))
	assert.Equal(t, `{"id":"job-rest-1","status":"pending"}`, body)

	resp, body = st.do(t, http.MethodGet, "/v1/requests/job-rest-1", team)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, `{"id":"job-rest-1","status":"pending"}`, body)
	resp, body = st.do(t, http.MethodGet, "/v1/requests/job-rest-1", http.Header{"X-Team": {"team-other"}})
	assert.Equal(t, http.StatusGone, resp.StatusCode, "another tenant's id looks unknown")
	assert.JSONEq(t, goneBody, body)

	ap.Release()
	require.Eventually(t, func() bool {
		resp, _ := st.do(t, http.MethodGet, "/v1/requests/job-rest-1", team)
		return resp.StatusCode != http.StatusAccepted
	}, 20*time.Second, 10*time.Millisecond)
	resp, body = st.do(t, http.MethodGet, "/v1/requests/job-rest-1", team)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, `"chat.completion"`, "the decode worker's answer, via the processor")

	resp, body = st.do(t, http.MethodDelete, "/v1/requests/job-rest-1", team)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Empty(t, body)
	assert.Empty(t, resp.Header.Get("Content-Type"))

	resp, body = st.do(t, http.MethodGet, "/v1/requests/job-rest-1", team)
	assert.Equal(t, http.StatusGone, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.JSONEq(t, goneBody, body)

	resp, _ = st.do(t, http.MethodGet, "/v1/requests/bad*id", team)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "ids are validated")
}

func TestAsyncEnqueueFetchDeleteGRPC(t *testing.T) {
	t.Parallel()
	st, rdb := startBrokerStack(t, nil)
	ap := startAPProcessor(t, st, rdb, 0)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-team", "team-e2e")

	var header metadata.MD
	resp, err := client.Generate(metadata.AppendToOutgoingContext(ctx, "x-ap-mode", "enqueue"), &coordinatorv1.GenerateRequest{
		RequestId: "job-grpc-1",
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(asyncChat),
		}},
	}, grpc.Header(&header))
	require.NoError(t, err)
	assert.EqualValues(t, http.StatusAccepted, resp.GetOpenai().GetStatusCode())
	assert.Equal(t, `{"id":"job-grpc-1","status":"pending"}`, string(resp.GetOpenai().GetJson()))
	assert.Equal(t, []string{"job-grpc-1"}, header.Get("x-request-id"))

	get := func(ctx context.Context) *coordinatorv1.OpenAIResponse {
		t.Helper()
		out, err := client.GetRequest(ctx, &coordinatorv1.GetRequestRequest{Id: "job-grpc-1"})
		require.NoError(t, err)
		return out.GetAnswer()
	}
	assert.EqualValues(t, http.StatusAccepted, get(ctx).GetStatusCode())
	other := metadata.AppendToOutgoingContext(context.Background(), "x-team", "team-other")
	assert.EqualValues(t, http.StatusGone, get(other).GetStatusCode())

	ap.Release()
	require.Eventually(t, func() bool { return get(ctx).GetStatusCode() != http.StatusAccepted }, 20*time.Second, 10*time.Millisecond)
	a := get(ctx)
	require.EqualValues(t, http.StatusOK, a.GetStatusCode(), string(a.GetJson()))
	assert.Equal(t, "application/json", a.GetContentType())
	assert.Contains(t, string(a.GetJson()), `"chat.completion"`)

	_, err = client.DeleteRequest(ctx, &coordinatorv1.DeleteRequestRequest{Id: "job-grpc-1"})
	require.NoError(t, err)
	a = get(ctx)
	assert.EqualValues(t, http.StatusGone, a.GetStatusCode())
	assert.JSONEq(t, goneBody, string(a.GetJson()))

	_, err = client.GetRequest(ctx, &coordinatorv1.GetRequestRequest{Id: "bad*id"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// A wait outlives the server's write timeout: the REST front lifts it for
// held requests.
func TestAsyncWaitOutlivesWriteTimeoutREST(t *testing.T) {
	t.Parallel()
	st, rdb := startBrokerStack(t, map[string]string{"COORDINATOR_SERVER_WRITE_TIMEOUT": "500ms"})
	ap := startAPProcessor(t, st, rdb, time.Second)
	ap.Release()

	resp := st.post(t, "/v1/chat/completions", asyncChat, http.Header{"X-Ap-Mode": {"wait"}, "X-Team": {"team-e2e"}})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, `"chat.completion"`)
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	resp, _ = st.do(t, http.MethodGet, "/v1/requests/"+id, http.Header{"X-Team": {"team-e2e"}})
	assert.Equal(t, http.StatusGone, resp.StatusCode, "delivered on the held connection: gone")
}

func TestAsyncRefusalsREST(t *testing.T) {
	t.Parallel()
	st, _ := startBrokerStack(t, nil)
	resp := st.post(t, "/v1/chat/completions", asyncChat, http.Header{"X-Ap-Mode": {"sideways"}})
	body := readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.JSONEq(t, `{"error":{"message":"unknown X-AP-Mode value","type":"invalid_request_error","code":"INVALID_REQUEST"}}`, body)
	assert.Equal(t, refusalBody, body, "byte for byte")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	resp = st.post(t, "/v1/chat/completions", asyncChat, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no mode header: served by decode")
}

const refusalBody = `{"error":{"message":"unknown X-AP-Mode value","type":"invalid_request_error","code":"INVALID_REQUEST"}}`

// Over gRPC a refusal is an answer: OK, with the refusal's status and the
// OpenAI error object, as the REST front relays it.
func TestAsyncRefusalsGRPC(t *testing.T) {
	t.Parallel()
	st, _ := startBrokerStack(t, nil)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	resp, err := client.Generate(metadata.AppendToOutgoingContext(context.Background(), "x-ap-mode", "sideways"), &coordinatorv1.GenerateRequest{
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(asyncChat),
		}},
	})
	require.NoError(t, err)
	assert.EqualValues(t, http.StatusBadRequest, resp.GetOpenai().GetStatusCode())
	assert.Equal(t, "application/json", resp.GetOpenai().GetContentType())
	assert.Equal(t, refusalBody, string(resp.GetOpenai().GetJson()))
}

func TestAsyncRequestsWithoutBroker(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly)
	resp, body := st.do(t, http.MethodGet, "/v1/requests/job-1", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	resp, _ = st.do(t, http.MethodDelete, "/v1/requests/job-1", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	_, err := client.GetRequest(context.Background(), &coordinatorv1.GetRequestRequest{Id: "job-1"})
	assert.Equal(t, codes.Unimplemented, status.Code(err), fmt.Sprint(err))
	_, err = client.DeleteRequest(context.Background(), &coordinatorv1.DeleteRequestRequest{Id: "job-1"})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}

// brokerStartBound is async-broker's bound on its start (startupTimeout).
const brokerStartBound = 5 * time.Second

// A Redis that is down when the coordinator starts is a startup error,
// bounded by the broker's start timeout and naming its cause, never
// a hang: here a Redis that accepts connections and never answers.
func TestAsyncBrokerRedisDownAtStartFailsStartup(t *testing.T) {
	t.Parallel()
	url := steptest.SilentRedis(t)
	_, gw, _ := startSim(t, sim.Options{})
	cfg, err := config.Parse([]byte(`
log_level: 1
server:
  listen_addr: "127.0.0.1:0"
  grpc_listen_addr: "127.0.0.1:0"
gateway:
  address: "`+gw+`"
`+strings.ReplaceAll(brokerPipeline, "REDIS_URL", url)), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	app := fx.New(App(cfg, logging.NewLogger(io.Discard, cfg.LogLevel)))
	require.NoError(t, app.Err(), "building the app connects to nothing")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err = app.Start(ctx)
	elapsed := time.Since(start)
	require.Error(t, err)
	want := "pipeline.steps[0] (async-broker): redis_url: redis at " + strings.TrimPrefix(url, "redis://") + " unreachable: context deadline exceeded"
	assert.Contains(t, err.Error(), want, "ended by the broker's own start timeout, not the test's")
	// Bounded, not a hang: generous for a loaded 2-core machine (it took
	// 10 s under a full parallel test run), far below the test's minute.
	assert.Less(t, elapsed, brokerStartBound+25*time.Second, "the start is bounded")
	// main prints this error as its one stderr line at every log level:
	// TestBinaryStartFailuresSayWhy ("redis unreachable") runs the binary.
}
