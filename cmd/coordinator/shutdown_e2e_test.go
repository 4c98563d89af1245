package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
)

const (
	// drainTimeout is four times what the short streams need (24 tokens
	// 50 ms apart), and those are long enough to be in flight still when
	// the stop begins, on a loaded CI machine too.
	drainTimeout = 5 * time.Second
	tokenDelay   = 50 * time.Millisecond
	// shortTokens finish well within drainTimeout; longTokens never do.
	shortTokens = 24
	longTokens  = 1000
)

func drainStream(tokens int) string {
	return `{"model":"sim-model","messages":[{"role":"user","content":"drain"}],"stream":true,"max_tokens":` + strconv.Itoa(tokens) + `}`
}

// drainedREST is a REST stream read up to its first event.
type drainedREST struct {
	body io.ReadCloser
	r    *bufio.Reader
}

func openRESTStream(t *testing.T, st *stack, tokens int) *drainedREST {
	t.Helper()
	resp := st.post(t, "/v1/chat/completions", drainStream(tokens), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "data: ") {
			return &drainedREST{body: resp.Body, r: r}
		}
	}
}

func openGRPCStream(t *testing.T, client coordinatorv1.CoordinatorServiceClient, tokens int) grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse] {
	t.Helper()
	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(drainStream(tokens))}},
	})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err)
	return stream
}

// ended is when a call in flight at stop ended, and how.
type ended struct {
	after  time.Duration // since the stop began
	events []string      // REST: the data of the events after the first
	status int           // REST unary: the status; gRPC: the code
	header http.Header
	err    error
}

// TestGracefulShutdown stops the app with streams and requests in flight
// over REST and gRPC: readiness goes false at once (/readyz 503, gRPC
// health NOT_SERVING) while the listeners still answer; a new request is
// refused (503 + Retry-After, UNAVAILABLE with a RetryInfo) and counted; a
// stream that finishes within server.shutdown_timeout ends normally; what
// is left at the timeout ends then with a final SSE error event (503) or
// UNAVAILABLE "server shutting down"; Stop returns and the listeners close.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{TokenDelay: tokenDelay})
	var adm *admission.Controller
	st := startStackEnv(t, map[string]string{
		"COORDINATOR_SERVER_SHUTDOWN_TIMEOUT": drainTimeout.String(),
		"COORDINATOR_SERVER_RETRY_AFTER":      "2s",
	}, gw, "", decodeOnly, fx.Populate(&adm))
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	restAddr := strings.TrimPrefix(st.restURL, "http://")

	restLong, grpcLong := openRESTStream(t, st, longTokens), openGRPCStream(t, client, longTokens)
	restShort, grpcShort := openRESTStream(t, st, shortTokens), openGRPCStream(t, client, shortTokens)
	results := make(map[string]ended)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var stopStart time.Time
	started := make(chan struct{})
	record := func(name string, e ended) {
		end := time.Now()
		<-started
		e.after = end.Sub(stopStart)
		mu.Lock()
		results[name] = e
		mu.Unlock()
	}
	for name, s := range map[string]*drainedREST{"rest short": restShort, "rest long": restLong} {
		wg.Go(func() {
			defer s.body.Close()
			events := sseData(t, s.r)
			record(name, ended{events: events})
		})
	}
	for name, s := range map[string]grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]{"grpc short": grpcShort, "grpc long": grpcLong} {
		wg.Go(func() {
			var events []string
			for {
				msg, err := s.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					record(name, ended{events: events, err: err})
					return
				}
				for _, d := range msg.GetOpenai().GetData() {
					events = append(events, string(d))
				}
			}
		})
	}
	// Requests whose decode worker never answers.
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodPost, st.restURL+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("X-Sim-Fault", "decode=hang")
		resp, err := st.client.Do(req)
		if err != nil {
			record("rest unary", ended{err: err})
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		record("rest unary", ended{status: resp.StatusCode, header: resp.Header})
	})
	wg.Go(func() {
		_, err := client.Generate(metadata.AppendToOutgoingContext(context.Background(), "x-sim-fault", "decode=hang"), chatRequest("hang", chatBody))
		record("grpc unary", ended{err: err})
	})
	waitInFlight(t, adm, 6, 4)

	stopped := make(chan error, 1)
	stopStart = time.Now()
	close(started)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), st.app.StopTimeout())
		defer cancel()
		stopped <- st.app.Stop(ctx)
	}()

	// Readiness first, while the listeners still answer.
	require.Eventually(t, func() bool {
		resp, err := st.client.Get(st.restURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, drainTimeout/2, 5*time.Millisecond, "/readyz turns 503 at once")
	health, err := healthpb.NewHealthClient(st.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, health.GetStatus())

	// A new request is refused, and told to come back.
	resp := st.post(t, "/v1/chat/completions", chatBody, nil)
	body := readAll(t, resp.Body)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	assert.True(t, resp.Close, "the connection closes so the retry goes elsewhere")
	msg, _, code := openAIError(t, body)
	assert.Equal(t, "server shutting down (request_id: "+resp.Header.Get("X-Request-Id")+")", msg)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	_, err = client.Generate(context.Background(), chatRequest("late", chatBody))
	refusal := status.Convert(err)
	assert.Equal(t, codes.Unavailable, refusal.Code(), "%v", err)
	d, ok := apierror.RetryDelay(refusal)
	assert.True(t, ok)
	assert.Equal(t, 2*time.Second, d)
	assert.Equal(t, "2", st.scrape(t, `coordinator_rejected_requests_total{reason="shutting_down"}`))
	assert.Less(t, time.Since(stopStart), drainTimeout, "all of this happened before the drain timed out")

	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(drainTimeout + 5*time.Second):
		t.Fatal("Stop did not return")
	}
	stopTook := time.Since(stopStart)
	wg.Wait()
	for name, e := range results {
		t.Logf("%s ended %s after the stop began", name, e.after)
	}
	t.Logf("Stop took %s", stopTook)

	for _, name := range []string{"rest short", "grpc short"} {
		e := results[name]
		require.NoError(t, e.err, name)
		require.NotEmpty(t, e.events, name)
		assert.Equal(t, "[DONE]", e.events[len(e.events)-1], "%s ends normally", name)
		assert.Positive(t, e.after, "%s was in flight when the stop began", name)
		assert.Less(t, e.after, drainTimeout, name)
	}
	for _, name := range []string{"rest long", "grpc long", "rest unary", "grpc unary"} {
		e := results[name]
		assert.GreaterOrEqual(t, e.after, drainTimeout, "%s ran until the drain timed out", name)
		assert.Less(t, e.after, drainTimeout+time.Second, "%s was ended when the drain timed out", name)
	}
	restLongEvents := results["rest long"].events
	require.NotEmpty(t, restLongEvents)
	last := restLongEvents[len(restLongEvents)-1]
	msg, typ, code := openAIError(t, last)
	assert.Regexp(t, `^server shutting down \(request_id: [0-9a-f-]{36}\)$`, msg, "the final event names the request id (D19): %s", last)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "api_error", typ)
	assert.NotContains(t, restLongEvents, "[DONE]")
	assert.Equal(t, http.StatusServiceUnavailable, results["rest unary"].status)
	assert.Equal(t, "2", results["rest unary"].header.Get("Retry-After"))
	for _, name := range []string{"grpc long", "grpc unary"} {
		st := status.Convert(results[name].err)
		assert.Equal(t, codes.Unavailable, st.Code(), "%s: %v", name, results[name].err)
		assert.Equal(t, "server shutting down", st.Message(), name)
	}
	assert.Less(t, stopTook, drainTimeout+admission.StopGrace, "Stop returns soon after the drain")

	_, err = net.DialTimeout("tcp", restAddr, time.Second)
	assert.Error(t, err, "the REST listener is closed")
}
