package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
)

// faultGateway is the gateway block with per-phase timeouts (the response
// headers, connect and stream idle bounds all set to timeout) and a quick
// retry policy, appended under gateway.address by startStack.
func faultGateway(timeout string) string {
	return fmt.Sprintf(`
  timeout: %[1]s
  connect_timeout: %[1]s
  stream_idle_timeout: %[1]s
  retry:
    max_attempts: 3
    initial_backoff: 5ms
    max_backoff: 20ms
`, timeout)
}

// faultPipeline is the cascade without conditional-decode (so every fault
// reaches the leg it names) with faultGateway(timeout) and render's whole
// call bounded by renderTimeout.
func faultPipeline(timeout, renderTimeout string) string {
	return faultGateway(timeout) + fmt.Sprintf(`
pipeline:
  kv_connector: kv-nixl
  ec_connector: ec-nixl
  steps:
    - type: render
      params:
        address: "RENDER_URL"
        timeout: %[1]s
        connect_timeout: %[2]s
        retry:
          max_attempts: 3
          initial_backoff: 5ms
          max_backoff: 20ms
    - type: encode
    - type: prefill
    - type: decode
`, renderTimeout, timeout)
}

// Timeouts of the fault tests: short, so a hang is answered quickly, yet
// long enough that the healthy legs before a faulty one finish on a loaded
// machine (race detector, parallel tests). Tests that need no timeout to
// fire use relaxed ones.
const (
	shortTimeout       = "2s"
	shortRenderTimeout = "3s"
	relaxedTimeout     = "10s"
)

// faultBound is the longest any faulty request may take: the timeouts
// above, a few retries, and slack for a loaded machine. Never a hang.
const faultBound = 12 * time.Second

// faultChat is an image chat, so every leg runs: render, encode, prefill,
// decode.
func faultChat(stream bool) string {
	return fmt.Sprintf(`{"model":"sim-model","stream":%t,"max_tokens":4,"messages":[{"role":"user","content":[`+
		`{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"%s"}}]}]}`, stream, imageURL)
}

// warmRender makes the simulator load its tokenizer once, so no test's
// first render call pays for it against a short timeout.
var warmRender sync.Once

// startFaultStack starts the simulator and the app with faultPipeline and
// the timeouts given.
func startFaultStack(t *testing.T, opts sim.Options, timeout, renderTimeout string) (*sim.Sim, *stack) {
	t.Helper()
	s, gw, render := startSim(t, opts)
	warmRender.Do(func() {
		req, err := http.NewRequest(http.MethodPost, render+"/v1/chat/completions/render", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header = http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"warm-up"}}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "the warm-up render")
	})
	return s, startStack(t, gw, render, faultPipeline(timeout, renderTimeout))
}

// faultFront is a way in: REST with or without SSE, gRPC unary or stream.
type faultFront string

const (
	viaREST       faultFront = "rest"
	viaRESTStream faultFront = "rest-stream"
	viaGRPC       faultFront = "grpc"
	viaGRPCStream faultFront = "grpc-stream"
)

var faultFronts = []faultFront{viaREST, viaRESTStream, viaGRPC, viaGRPCStream}

func (f faultFront) streams() bool { return f == viaRESTStream || f == viaGRPCStream }

// faultOutcome is what a client saw of a request that failed.
type faultOutcome struct {
	// status is the REST status, or the final SSE error event's code after
	// the first byte; for gRPC, the REST status apierror maps the code to.
	status  int
	code    codes.Code // gRPC only
	leg     string     // gRPC only: the UpstreamError's leg
	message string
	// before counts the answer's events that reached the client before the
	// failure.
	before int
}

// faultCall sends body through front with the X-Sim-Fault header and returns how
// it failed; a request that succeeds fails the test.
func (s *stack) faultCall(t *testing.T, front faultFront, id, fault string) faultOutcome {
	t.Helper()
	body := faultChat(front.streams())
	switch front {
	case viaREST, viaRESTStream:
		return s.faultREST(t, id, body, fault)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*faultBound)
	defer cancel()
	if fault != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(sim.FaultHeader), fault)
	}
	client := coordinatorv1.NewCoordinatorServiceClient(s.conn)
	var before int
	var err error
	if front == viaGRPC {
		_, err = client.Generate(ctx, chatRequest(id, body))
	} else {
		before, err = faultGRPCStream(ctx, client, id, body)
	}
	require.Error(t, err, "the request must fail")
	st := status.Convert(err)
	out := faultOutcome{status: apierror.HTTPStatus(st), code: st.Code(), message: st.Message(), before: before}
	if u := apierror.UpstreamDetail(st); u != nil {
		out.leg = u.GetLeg()
	}
	return out
}

// faultGRPCStream reads a GenerateStream to its end and counts the data
// events before its error.
func faultGRPCStream(ctx context.Context, client coordinatorv1.CoordinatorServiceClient, id, body string) (int, error) {
	stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: id,
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(body)}}})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(msg.GetOpenai().GetData())
	}
}

func (s *stack) faultREST(t *testing.T, id, body, fault string) faultOutcome {
	t.Helper()
	h := http.Header{"X-Request-Id": {id}}
	if fault != "" {
		h.Set(sim.FaultHeader, fault)
	}
	resp := s.post(t, "/v1/chat/completions", body, h)
	if resp.StatusCode != http.StatusOK {
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		msg, _, code := openAIError(t, readAll(t, resp.Body))
		assert.Equal(t, resp.StatusCode, code)
		return faultOutcome{status: resp.StatusCode, message: msg}
	}
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"), "a 200 answer must be a stream that fails")
	events := sseData(t, resp.Body)
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	msg, _, code := openAIError(t, last)
	require.NotZero(t, code, "the last event is the error: %s", last)
	return faultOutcome{status: code, message: msg, before: len(events) - 1}
}

// faultCase is a fault and how a client sees it.
type faultCase struct {
	fault   string
	status  int
	message string // the message's start, without the request id
}

// grpcCode is the gRPC code a REST status of a leg failure comes from.
func faultGRPCCode(status int) codes.Code {
	if status == http.StatusGatewayTimeout {
		return codes.DeadlineExceeded
	}
	return codes.Unavailable
}

// check asserts how a failure reached the client.
func (c faultCase) check(t *testing.T, front faultFront, id string, got faultOutcome, elapsed time.Duration) {
	t.Helper()
	assert.Equal(t, c.status, got.status, "%+v", got)
	assert.Equal(t, c.message+" (request_id: "+id+")", got.message)
	assert.Less(t, elapsed, faultBound, "answered, not hung")
	if front == viaGRPC || front == viaGRPCStream {
		assert.Equal(t, faultGRPCCode(c.status), got.code)
		leg, _, _ := strings.Cut(c.message, " ")
		assert.Equal(t, leg, got.leg, "the UpstreamError names the leg")
	}
}

// TestUpstreamFaultsBeforeTheFirstByte: a leg that closes the connection,
// hangs, stalls, breaks off its answer or answers a status outside 100-599
// (never relayed, the decode leg's neither) before anything reached the client
// gets a 502 or 504 OpenAI error (REST, streamed or not) or the matching
// gRPC status with the UpstreamError, within the configured timeouts.
func TestUpstreamFaultsBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	_, st := startFaultStack(t, sim.Options{Strict: true}, shortTimeout, shortRenderTimeout)
	var cases []faultCase
	for _, leg := range []string{"render", "encode", "prefill", "decode"} {
		name := leg
		if leg == "encode" {
			name = "encode[0]"
		}
		stalled, cutOff := name+" answer stalled", name+" answer cut off"
		if leg == "render" { // render's own read error wraps the body's: named as a whole call
			stalled, cutOff = "render timed out", "render unreachable"
		}
		cases = append(cases,
			faultCase{fault: leg + "=close", status: 502, message: name + " unreachable"},
			faultCase{fault: leg + "=hang", status: 504, message: name + " timed out"},
			faultCase{fault: leg + "=hang-mid-stream", status: 504, message: stalled},
			faultCase{fault: leg + "=reset-mid-stream", status: 502, message: cutOff},
			faultCase{fault: leg + "=status:999", status: 502, message: name + " answered no HTTP status"},
		)
	}
	for _, c := range cases {
		for _, front := range faultFronts {
			if front.streams() && strings.HasPrefix(c.fault, "decode=") && strings.Contains(c.fault, "mid-stream") {
				continue // after the first byte: TestUpstreamFaultsMidStream
			}
			t.Run(c.fault+"/"+string(front), func(t *testing.T) {
				t.Parallel()
				id := strings.NewReplacer("=", "-", "[", "", "]", "", ":", "-").Replace(c.fault) + "-" + string(front)
				start := time.Now()
				got := st.faultCall(t, front, id, c.fault)
				c.check(t, front, id, got, time.Since(start))
				assert.Zero(t, got.before, "nothing reached the client before the error")
			})
		}
	}
}

// TestUpstreamFaultsMidStream: a decode stream that goes silent or breaks
// off after its first token ends with a final error event (REST) or the
// gRPC status, after the events that did arrive.
func TestUpstreamFaultsMidStream(t *testing.T) {
	t.Parallel()
	_, st := startFaultStack(t, sim.Options{Strict: true, OutputTokens: 8}, shortTimeout, shortRenderTimeout)
	cases := []faultCase{
		{fault: "decode=hang-mid-stream", status: 504, message: "decode answer stalled"},
		{fault: "decode=reset-mid-stream", status: 502, message: "decode answer cut off"},
	}
	for _, c := range cases {
		for _, front := range []faultFront{viaRESTStream, viaGRPCStream} {
			t.Run(c.fault+"/"+string(front), func(t *testing.T) {
				t.Parallel()
				id := strings.ReplaceAll(c.fault, "=", "-") + "-" + string(front)
				start := time.Now()
				got := st.faultCall(t, front, id, c.fault)
				c.check(t, front, id, got, time.Since(start))
				assert.Equal(t, 1, got.before, "the first token reached the client")
			})
		}
	}
}

// faultClosedURL is the URL of a port nothing listens on.
func faultClosedURL(t *testing.T) string {
	t.Helper()
	// A socket bound and never listening: a connection to its port is
	// refused, and, unlike a closed listener's port, no other test's
	// listener can take the port meanwhile.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// TestUpstreamRefused: a gateway or render service that refuses the
// connection is a 502 naming the first leg that could not connect (after
// its retries, for the idempotent legs).
func TestUpstreamRefused(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	refused := faultClosedURL(t)
	textPipeline := faultGateway(shortTimeout) + `
pipeline:
  steps:
    - type: prefill
    - type: decode
`
	stacks := []struct {
		name    string
		st      *stack
		message string
	}{
		{name: "render", st: startStack(t, gw, refused, faultPipeline(shortTimeout, shortRenderTimeout)), message: "render unreachable"},
		{name: "encode", st: startStack(t, refused, render, faultPipeline(shortTimeout, shortRenderTimeout)), message: "encode[0] unreachable"},
		{name: "prefill", st: startStack(t, refused, render, textPipeline), message: "prefill unreachable"},
		{name: "decode", st: startStack(t, refused, render, faultGateway(shortTimeout)+decodeOnly), message: "decode unreachable"},
	}
	for _, s := range stacks {
		for _, front := range faultFronts {
			t.Run(s.name+"/"+string(front), func(t *testing.T) {
				t.Parallel()
				id := "refused-" + s.name + "-" + string(front)
				start := time.Now()
				got := s.st.faultCall(t, front, id, "")
				faultCase{status: 502, message: s.message}.check(t, front, id, got, time.Since(start))
			})
		}
	}
}

// faultLegCounts counts the legs the simulator received for one request,
// by target (render, encode, prefill, decode).
func faultLegCounts(s *sim.Sim, requestID string) map[string]int {
	counts := map[string]int{}
	for _, l := range s.Legs() {
		if !headers.IsLegRequestID(l.Header.Get("X-Request-Id"), requestID) {
			continue
		}
		if l.Service == sim.ServiceRender {
			counts["render"]++
		} else {
			counts[l.Profile]++
		}
	}
	return counts
}

// TestUpstreamRetries: render, encode and prefill are sent again after a
// connection closed before any answer or a 502/503, and the request
// succeeds; a 500 is not retried, attempts run out at max_attempts, and
// decode is never retried. Every attempt is counted in the leg metrics.
func TestUpstreamRetries(t *testing.T) {
	t.Parallel()
	s, st := startFaultStack(t, sim.Options{Strict: true}, relaxedTimeout, relaxedTimeout)
	once := map[string]int{"render": 1, "encode": 1, "prefill": 1, "decode": 1}
	with := func(target string, n int) map[string]int {
		m := map[string]int{}
		for k, v := range once {
			m[k] = v
		}
		m[target] = n
		return m
	}
	tests := []struct {
		fault   string
		legs    map[string]int
		status  int    // 0: success
		message string // the failure's message start
	}{
		{fault: "render=status-once:503", legs: with("render", 2)},
		{fault: "render=close/1", legs: with("render", 2)},
		{fault: "encode=status-once:502", legs: with("encode", 2)},
		{fault: "encode=close/2", legs: with("encode", 3)},
		{fault: "prefill=status-once:503", legs: with("prefill", 2)},
		{fault: "prefill=close/1", legs: with("prefill", 2)},
		{fault: "prefill=status:503/3", legs: map[string]int{"render": 1, "encode": 1, "prefill": 3}, status: 502, message: "prefill failed: HTTP 503"},
		{fault: "prefill=status-once:500", legs: map[string]int{"render": 1, "encode": 1, "prefill": 1}, status: 502, message: "prefill failed: HTTP 500"},
		{fault: "decode=close/1", legs: once, status: 502, message: "decode unreachable"},
		{fault: "decode=status-once:503", legs: once, status: 503},
	}
	for _, tt := range tests {
		for _, front := range []faultFront{viaREST, viaGRPCStream} {
			t.Run(tt.fault+"/"+string(front), func(t *testing.T) {
				t.Parallel()
				id := strings.NewReplacer("=", "-", ":", "-", "/", "-").Replace(tt.fault) + "-" + string(front)
				if tt.status == 0 {
					faultSucceeds(t, st, front, id, tt.fault)
				} else {
					got := st.faultCall(t, front, id, tt.fault)
					assert.Equal(t, tt.status, got.status, "%+v", got)
					assert.True(t, strings.HasPrefix(got.message, tt.message), got.message)
				}
				assert.Equal(t, tt.legs, faultLegCounts(s, id))
			})
		}
	}
	t.Run("metrics count attempts", func(t *testing.T) {
		// On a stack of its own: the counts are the app's.
		_, own := startFaultStack(t, sim.Options{Strict: true}, relaxedTimeout, relaxedTimeout)
		faultSucceeds(t, own, viaREST, "metrics-1", "prefill=status-once:503")
		assert.Equal(t, "1", own.scrape(t, `coordinator_leg_duration_seconds_count{phase="prefill",status="503"}`))
		assert.Equal(t, "1", own.scrape(t, `coordinator_leg_duration_seconds_count{phase="prefill",status="200"}`))
	})
}

// faultSucceeds sends the image chat with fault and asserts a whole answer.
func faultSucceeds(t *testing.T, st *stack, front faultFront, id, fault string) {
	t.Helper()
	switch front {
	case viaREST:
		resp := st.post(t, "/v1/chat/completions", faultChat(false), http.Header{"X-Request-Id": {id}, sim.FaultHeader: {fault}})
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, `"chat.completion"`)
	case viaGRPCStream:
		ctx := metadata.AppendToOutgoingContext(context.Background(), strings.ToLower(sim.FaultHeader), fault)
		n, err := faultGRPCStream(ctx, coordinatorv1.NewCoordinatorServiceClient(st.conn), id, faultChat(true))
		require.NoError(t, err)
		assert.Positive(t, n)
	default:
		t.Fatalf("front %s not used here", front)
	}
}

// TestStreamThatKeepsSendingIsNotCut: a decode stream that lasts longer
// than the response-header and stream-idle timeouts, with every gap between
// tokens shorter than the idle bound, reaches its end.
func TestStreamThatKeepsSendingIsNotCut(t *testing.T) {
	t.Parallel()
	const tokens, gap = 16, 200 * time.Millisecond // 3.2 s in all; both bounds 2 s
	_, gw, _ := startSim(t, sim.Options{Strict: true, TokenDelay: gap})
	st := startStack(t, gw, "", faultGateway(shortTimeout)+decodeOnly)
	body := fmt.Sprintf(`{"model":"sim-model","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"slow"}]}`, tokens)

	t.Run("REST", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		resp := st.post(t, "/v1/chat/completions", body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		events := sseData(t, resp.Body)
		assert.Greater(t, time.Since(start), 3*time.Second, "the stream outlived the timeouts")
		require.NotEmpty(t, events)
		assert.Equal(t, "[DONE]", events[len(events)-1])
		assert.Equal(t, tokens+2, len(events), "every token, the finish event and [DONE]")
	})
	t.Run("gRPC", func(t *testing.T) {
		t.Parallel()
		n, err := faultGRPCStream(context.Background(), coordinatorv1.NewCoordinatorServiceClient(st.conn), "slow-grpc", body)
		require.NoError(t, err)
		assert.Equal(t, tokens+2, n)
	})
}
