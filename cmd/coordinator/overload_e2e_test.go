package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
)

const overloadStream = `{"model":"sim-model","messages":[{"role":"user","content":"Hello!"}],"stream":true}`

// waitInFlight waits until the admission counts requests and streams.
func waitInFlight(t *testing.T, adm *admission.Controller, requests, streams int) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, s := adm.InFlight()
		return r == requests && s == streams
	}, 5*time.Second, 2*time.Millisecond, "in flight: want %d requests, %d streams", requests, streams)
}

// TestConcurrencyLimits: past server.max_concurrent_requests (streams
// included) and server.max_concurrent_streams a request is refused at once,
// REST with 429, Retry-After rounded up and an OpenAI rate_limit_error, gRPC
// with RESOURCE_EXHAUSTED, a RetryInfo and the retry pushback trailer; each
// refusal is counted by reason; a released place serves again.
func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	var adm *admission.Controller
	st := startStackEnv(t, map[string]string{
		"COORDINATOR_SERVER_MAX_CONCURRENT_REQUESTS": "2",
		"COORDINATOR_SERVER_MAX_CONCURRENT_STREAMS":  "1",
		"COORDINATOR_SERVER_RETRY_AFTER":             "1500ms",
	}, gw, "", decodeOnly, fx.Populate(&adm))
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)

	// A REST stream and a gRPC request, both held by a decode worker that
	// never answers.
	heldStream, releaseStream := context.WithCancel(context.Background())
	defer releaseStream()
	heldUnary, releaseUnary := context.WithCancel(context.Background())
	defer releaseUnary()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(heldStream, http.MethodPost, st.restURL+"/v1/chat/completions", strings.NewReader(overloadStream))
		req.Header.Set("X-Sim-Fault", "decode=hang")
		if resp, err := st.client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	wg.Go(func() {
		_, _ = client.Generate(metadata.AppendToOutgoingContext(heldUnary, "x-sim-fault", "decode=hang"), chatRequest("held-unary", chatBody))
	})
	waitInFlight(t, adm, 2, 1)

	resp := st.post(t, "/v1/chat/completions", chatBody, nil)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"), "1.5 s rounds up")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	msg, typ, code := openAIError(t, body)
	assert.Equal(t, "rate_limit_error", typ)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Contains(t, msg, "server.max_concurrent_requests 2")

	var trailer metadata.MD
	_, err := client.Generate(context.Background(), chatRequest("refused-unary", chatBody), grpc.Trailer(&trailer))
	requireRetryable(t, err, codes.ResourceExhausted)
	assert.Equal(t, []string{"1500"}, trailer.Get("grpc-retry-pushback-ms"))

	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(overloadStream)}},
	})
	require.NoError(t, err)
	_, err = stream.Recv()
	requireRetryable(t, err, codes.ResourceExhausted)
	assert.Equal(t, []string{"1500"}, stream.Trailer().Get("grpc-retry-pushback-ms"))

	// One place free: a second stream is still refused, a request is served.
	releaseUnary()
	waitInFlight(t, adm, 1, 1)
	resp = st.post(t, "/v1/chat/completions", overloadStream, nil)
	body = readAll(t, resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	msg, _, _ = openAIError(t, body)
	assert.Contains(t, msg, "server.max_concurrent_streams 1")
	resp = st.post(t, "/v1/chat/completions", chatBody, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))

	assert.Equal(t, "3", st.scrape(t, `coordinator_rejected_requests_total{reason="requests"}`))
	assert.Equal(t, "1", st.scrape(t, `coordinator_rejected_requests_total{reason="streams"}`))
	assert.Equal(t, "0", st.scrape(t, `coordinator_rejected_requests_total{reason="shutting_down"}`))

	releaseStream()
	waitInFlight(t, adm, 0, 0)
}

// requireRetryable checks a gRPC refusal: its code and a RetryInfo of 1.5 s.
func requireRetryable(t *testing.T, err error, code codes.Code) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, code, st.Code(), "%v", err)
	d, ok := apierror.RetryDelay(st)
	require.True(t, ok, "RetryInfo detail")
	assert.Equal(t, 1500*time.Millisecond, d)
}

// rawConn dials the REST port for a client that speaks HTTP/1.1 by hand.
func rawConn(t *testing.T, st *stack) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(st.restURL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// closedWithin reads conn until the server closes it and returns when that
// was, failing the test past limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(start.Add(limit)))
	got, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open past %s", limit)
	return time.Since(start), string(got)
}

// TestSlowloris: a client that trickles its headers is cut off after
// server.read_header_timeout, without an answer.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	_, gw, _ := startSim(t, sim.Options{})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_READ_HEADER_TIMEOUT": timeout.String()}, gw, "", decodeOnly)
	start := time.Now() // the server's deadline runs from the connection's first read
	conn := rawConn(t, st)
	_, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\n")
	require.NoError(t, err)
	trickled := make(chan struct{})
	go func() { // one header line every 50 ms, until the server hangs up
		defer close(trickled)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(conn, "X-Slow-%d: 1\r\n", i); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	_, answer := closedWithin(t, conn, 5*time.Second)
	took := time.Since(start)
	assert.Empty(t, answer)
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+2*time.Second)
	_ = conn.Close()
	<-trickled
}

// TestHugeHeaders: a header block past server.max_header_bytes gets 431.
func TestHugeHeaders(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_MAX_HEADER_BYTES": "4096"}, gw, "", decodeOnly)
	resp := st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Big": {strings.Repeat("a", 16<<10)}})
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	resp = st.post(t, "/v1/chat/completions", chatBody, http.Header{"X-Fits": {strings.Repeat("a", 2<<10)}})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "headers within the cap pass")
}

// TestSlowBody: a body that stops arriving gets 408 once
// server.read_timeout ran out, and the connection closes.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	_, gw, _ := startSim(t, sim.Options{})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_READ_TIMEOUT": timeout.String()}, gw, "", decodeOnly)
	start := time.Now()
	conn := rawConn(t, st)
	_, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(chatBody), chatBody[:10])
	require.NoError(t, err)
	_, answer := closedWithin(t, conn, 5*time.Second)
	took := time.Since(start)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), nil)
	require.NoError(t, err, answer)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	msg, _, _ := openAIError(t, readAll(t, resp.Body))
	assert.Contains(t, msg, "server.read_timeout")
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+2*time.Second)
}

// floodGateway answers every leg with an endless stream of 64 KiB events
// and reports when each leg's request context ended.
type floodGateway struct {
	*httptest.Server
	ended chan time.Time
}

func startFloodGateway(t *testing.T) *floodGateway {
	t.Helper()
	g := &floodGateway{ended: make(chan time.Time, 4)}
	event := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		stop := context.AfterFunc(r.Context(), func() { g.ended <- time.Now() })
		defer stop()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for {
			if _, err := w.Write(event); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(g.Close)
	return g
}

// legEnded waits for the gateway's leg to end and returns how long after
// start it did.
func (g *floodGateway) legEnded(t *testing.T, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	select {
	case end := <-g.ended:
		return end.Sub(start)
	case <-time.After(limit):
		t.Fatalf("the leg of a client that stopped reading still runs after %s", limit)
		return 0
	}
}

// waitGoroutines waits until the goroutine count is back to what allowed
// says, the baseline and the runners the channel keeps (polled here:
// assert.Eventually runs its condition on goroutines of its own).
func waitGoroutines(t *testing.T, allowed func() int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > allowed() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d, allowed %d\n%s", runtime.NumGoroutine(), allowed(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const slowReaderTimeout = 500 * time.Millisecond

// TestSlowStreamReaderOverREST: a REST client that stops reading its
// stream has its write fail after server.stream_write_timeout once its
// buffers are full; the decode leg's request context ends with it and
// every goroutine of the request goes. Not parallel: it counts goroutines.
func TestSlowStreamReaderOverREST(t *testing.T) {
	gw := startFloodGateway(t)
	var in *service.InProcess
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_STREAM_WRITE_TIMEOUT": slowReaderTimeout.String()}, gw.URL, "", decodeOnly,
		fx.Populate(&in))
	baseline := runtime.NumGoroutine()

	conn := rawConn(t, st)
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4<<10))
	start := time.Now()
	_, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(overloadStream), overloadStream)
	require.NoError(t, err)
	took := gw.legEnded(t, start, 10*time.Second)
	t.Logf("the decode leg ended %s after the request", took)
	assert.GreaterOrEqual(t, took, slowReaderTimeout)
	assert.Less(t, took, slowReaderTimeout+3*time.Second)

	var head [12]byte
	_, err = io.ReadFull(conn, head[:])
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 200", string(head[:]), "the stream had started")
	_ = conn.Close()
	// The stream's handler ran on a runner the channel keeps for the next
	// stream: one parked goroutine, not the request's.
	waitGoroutines(t, func() int { return baseline + in.Channel.IdleRunners() })
	assert.LessOrEqual(t, in.Channel.IdleRunners(), 1)
}

// TestSlowStreamReaderOverGRPC: the same over gRPC, where flow control
// blocks the send: the call is ended after stream_write_timeout, and the
// client that reads again finds DEADLINE_EXCEEDED after what was sent. Not
// parallel: it counts goroutines.
func TestSlowStreamReaderOverGRPC(t *testing.T) {
	gw := startFloodGateway(t)
	var addrs *service.Addresses
	startStackEnv(t, map[string]string{"COORDINATOR_SERVER_STREAM_WRITE_TIMEOUT": slowReaderTimeout.String()}, gw.URL, "", decodeOnly,
		fx.Populate(&addrs))
	// Fixed 64 KiB windows (no BDP growth): the client stops taking data
	// as soon as it stops reading.
	conn, err := grpc.NewClient(addrs.GRPC(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	defer conn.Close()
	client := coordinatorv1.NewCoordinatorServiceClient(conn)
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}) // connect first
	require.NoError(t, err)
	baseline := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(overloadStream)}},
	})
	require.NoError(t, err)
	took := gw.legEnded(t, start, 10*time.Second)
	t.Logf("the decode leg ended %s after the request", took)
	assert.GreaterOrEqual(t, took, slowReaderTimeout)
	assert.Less(t, took, slowReaderTimeout+3*time.Second)

	var events int
	for {
		msg, err := stream.Recv()
		if err != nil {
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), "server.stream_write_timeout")
			break
		}
		events += len(msg.GetOpenai().GetData())
		require.True(t, bytes.HasPrefix(msg.GetOpenai().GetData()[0], []byte("xxx")))
	}
	assert.Positive(t, events)
	waitGoroutines(t, func() int { return baseline })
}
