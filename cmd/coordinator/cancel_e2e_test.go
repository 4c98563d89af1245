package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// cancelBound is how soon after a client's disconnect every leg of its
// request must be torn down: a correctness bound (loopback, no real work),
// not a benchmark.
const cancelBound = 50 * time.Millisecond

// The client disconnect tests: for each API and each point of the cascade,
// a client goes away while legs are in flight, and the simulator reports
// (sim.Options.OnLegEnd) when each leg's request context ended. Every leg of
// the request must end, and the slowest of those still running at the
// disconnect within cancelBound of it.
//
// They run one request at a time and not in parallel with the package's
// other tests: they measure latency. On a shared 2-core machine under the
// race detector the whole process is sometimes left without a CPU for tens
// of milliseconds (measured: a goroutine waking every 0.5 ms saw gaps up to
// 155 ms under a load average of 11). So a case over the bound is measured
// again, at most cancelAttempts times in all, when the process's threads,
// summed, waited for a CPU in that window at least as long as the excess; a
// case over the bound without such starvation fails at once, and the last
// attempt is held to the bound whatever the load.

// cancelAttempts bounds the measurements of one case.
const cancelAttempts = 4

// cancelPoint is where in the cascade the client goes away.
type cancelPoint struct {
	name   string
	fault  string // X-Sim-Fault
	images int    // image parts in the chat body
	// The disconnect comes once the simulator received waitN legs of
	// target waitFor, once it finished a leg of target afterEnd (its
	// answer sent), or once the client read the stream's first event.
	waitFor    string
	waitN      int
	afterEnd   string
	firstEvent bool
	// torn is the target whose legs were in flight at the disconnect (at
	// least tornN of them); "" when none need be.
	torn  string
	tornN int
}

// cancelAPI sends one request as a client of one API does. The call runs
// on its own goroutine: it closes first when it has read the answer's first
// event (streams) and returns the call's error.
type cancelAPI struct {
	name   string
	stream bool
	call   func(ctx context.Context, st *stack, id, fault, body string, first chan<- struct{}) error
	// cancelled reports whether err is the client's own cancellation.
	cancelled func(err error) bool
}

// cancelMeasure is how one disconnect went.
type cancelMeasure struct {
	// lag is how long after the disconnect the slowest leg ended.
	lag time.Duration
	// starved is how long the process's threads waited for a CPU, in
	// total, from the disconnect until every leg had ended.
	starved time.Duration
}

func TestClientDisconnectCancelsEveryLegWithin50ms(t *testing.T) {
	ends := newLegEnds()
	// Tokens come every 5 ms: a stream is mid-way when the client leaves.
	s, gw, render := startSim(t, sim.Options{Strict: true, TokenDelay: 5 * time.Millisecond, OnLegEnd: ends.add})
	st := startStack(t, gw, render, fullPipeline)

	var worst time.Duration
	for _, api := range cancelAPIs() {
		for _, point := range cancelPoints(api.stream) {
			t.Run(api.name+"/"+point.name, func(t *testing.T) {
				for attempt := 1; ; attempt++ {
					m := runCancelCase(t, s, st, ends, api, point, attempt)
					if t.Failed() {
						return
					}
					if m.lag > cancelBound && attempt < cancelAttempts && m.starved >= m.lag-cancelBound {
						t.Logf("slowest leg ended %v after the disconnect while the process waited %v for a CPU: measuring again", m.lag, m.starved)
						continue
					}
					assert.LessOrEqual(t, m.lag, cancelBound, "slowest leg after the disconnect (the process waited %v for a CPU meanwhile)", m.starved)
					worst = max(worst, m.lag)
					return
				}
			})
		}
	}
	t.Logf("slowest leg over every case: %v after the disconnect (bound %v)", worst, cancelBound)
}

func cancelPoints(stream bool) []cancelPoint {
	decode := cancelPoint{name: "decode-before-headers", fault: "decode=hang", waitFor: sim.FaultTargetDecode, waitN: 1,
		torn: sim.FaultTargetDecode, tornN: 1}
	if stream {
		decode = cancelPoint{name: "mid-stream", firstEvent: true, torn: sim.FaultTargetDecode, tornN: 1}
	}
	return []cancelPoint{
		{name: "render", fault: "render=hang", waitFor: sim.FaultTargetRender, waitN: 1, torn: sim.FaultTargetRender, tornN: 1},
		{name: "encode-fan-out", fault: "encode=hang", images: 4, waitFor: sim.FaultTargetEncode, waitN: 4,
			torn: sim.FaultTargetEncode, tornN: 4},
		{name: "prefill", fault: "prefill=hang", waitFor: sim.FaultTargetPrefill, waitN: 1, torn: sim.FaultTargetPrefill, tornN: 1},
		// The decode leg may or may not have left by the disconnect; if
		// it has, it hangs and must be torn down.
		{name: "between-prefill-and-decode", fault: "decode=hang", afterEnd: sim.FaultTargetPrefill},
		decode,
	}
}

// runCancelCase sends one request, disconnects at point, checks that every
// leg ended and that the client saw its own cancellation, and measures.
func runCancelCase(t *testing.T, s *sim.Sim, st *stack, ends *legEnds, api cancelAPI, point cancelPoint, attempt int) cancelMeasure {
	id := fmt.Sprintf("cancel-%s-%s-%d", api.name, point.name, attempt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var disconnect struct {
		once sync.Once
		at   time.Time
		wait time.Duration // the process's run-queue wait so far
		done chan struct{}
	}
	disconnect.done = make(chan struct{})
	leave := func() {
		disconnect.once.Do(func() {
			disconnect.wait = runQueueWait()
			disconnect.at = time.Now()
			cancel()
			close(disconnect.done)
		})
	}
	if point.afterEnd != "" {
		ends.onEnd(id, point.afterEnd, leave)
	}

	first := make(chan struct{})
	result := make(chan error, 1)
	go func() { result <- api.call(ctx, st, id, point.fault, cancelBody(id, api.stream, point.images), first) }()

	switch {
	case point.firstEvent:
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no first event")
		}
		leave()
	case point.waitFor != "":
		require.Eventually(t, func() bool { return countTarget(legsOf(s, id), point.waitFor) >= point.waitN },
			10*time.Second, time.Millisecond, "the %s legs never arrived", point.waitFor)
		leave()
	}
	select {
	case <-disconnect.done:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the disconnect point was never reached")
	}
	select {
	case err := <-result:
		assert.True(t, api.cancelled(err), "the client sees its own cancellation, got %v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the call did not return after the disconnect")
	}
	// Every leg that reached the simulator has ended.
	require.Eventually(t, func() bool { return len(ends.of(id)) == len(legsOf(s, id)) },
		10*time.Second, time.Millisecond, "a leg outlived the request")

	m := cancelMeasure{starved: max(runQueueWait()-disconnect.wait, 0)}
	torn, slowest := 0, ""
	for _, e := range ends.of(id) {
		if !e.At.After(disconnect.at) {
			continue // it had finished before the disconnect
		}
		if e.Target == point.torn {
			torn++
		}
		if d := e.At.Sub(disconnect.at); d >= m.lag {
			m.lag, slowest = d, e.Target
		}
	}
	assert.GreaterOrEqual(t, torn, point.tornN, "%s legs in flight at the disconnect", point.torn)
	t.Logf("legs %v; the slowest to end after the disconnect: %s, after %v (run-queue wait %v)", targets(legsOf(s, id)), slowest, m.lag, m.starved)
	return m
}

// runQueueWait is how long the process's threads have waited, in total, for
// a CPU while runnable (Linux schedstat); 0 where that is not known, so
// that no measurement is repeated.
func runQueueWait() time.Duration {
	const dir = "/proc/self/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
		if err != nil {
			continue // the thread is gone
		}
		// "<ns on a CPU> <ns waiting on a run queue> <time slices>"
		if f := strings.Fields(string(b)); len(f) == 3 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// cancelBody is a chat request producing a long answer, with images image
// parts. Its prompt names the request, so no earlier answer is cached for it
// (conditional-decode would answer alone).
func cancelBody(id string, stream bool, images int) string {
	content := `"Tell me a long story about ` + id + `"`
	if images > 0 {
		parts := []string{`{"type":"text","text":"Describe these for ` + id + `"}`}
		for range images {
			parts = append(parts, `{"type":"image_url","image_url":{"url":"`+imageURL+`"}}`)
		}
		content = "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf(`{"model":"sim-model","stream":%t,"max_tokens":2000,"messages":[{"role":"user","content":%s}]}`, stream, content)
}

func cancelAPIs() []cancelAPI {
	restCancelled := func(err error) bool { return errors.Is(err, context.Canceled) }
	grpcCancelled := func(err error) bool { return status.Code(err) == codes.Canceled }
	return []cancelAPI{
		{name: "REST-stream", stream: true, call: restCall, cancelled: restCancelled},
		{name: "REST", call: restCall, cancelled: restCancelled},
		{name: "gRPC-stream", stream: true, call: grpcStreamCall, cancelled: grpcCancelled},
		{name: "gRPC", call: grpcUnaryCall, cancelled: grpcCancelled},
	}
}

// restCall posts a chat request and reads the answer to its end; the
// disconnect closes the connection.
func restCall(ctx context.Context, st *stack, id, fault, body string, first chan<- struct{}) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.restURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	if fault != "" {
		req.Header.Set(sim.FaultHeader, fault)
	}
	resp, err := st.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		return err
	}
	close(first)
	_, err = io.Copy(io.Discard, r)
	return err
}

// grpcStreamCall reads a GenerateStream to its end.
func grpcStreamCall(ctx context.Context, st *stack, id, fault, body string, first chan<- struct{}) error {
	stream, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).GenerateStream(grpcContext(ctx, fault),
		&coordinatorv1.GenerateStreamRequest{RequestId: id, Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(body)}}})
	if err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	close(first)
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// grpcUnaryCall calls Generate.
func grpcUnaryCall(ctx context.Context, st *stack, id, fault, body string, _ chan<- struct{}) error {
	_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(grpcContext(ctx, fault), chatRequest(id, body))
	if err == nil {
		return errors.New("answered despite the disconnect")
	}
	return err
}

func grpcContext(ctx context.Context, fault string) context.Context {
	if fault == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, strings.ToLower(sim.FaultHeader), fault)
}

// legEnds collects the simulator's leg-end reports and runs the callbacks
// tests hang on them. Safe for concurrent use.
type legEnds struct {
	mu    sync.Mutex
	ends  []sim.LegEnd
	hooks []legEndHook
}

type legEndHook struct {
	requestID, target string
	fn                func()
}

func newLegEnds() *legEnds { return &legEnds{} }

// add implements sim.Options.OnLegEnd.
func (l *legEnds) add(e sim.LegEnd) {
	l.mu.Lock()
	l.ends = append(l.ends, e)
	var run []func()
	for _, h := range l.hooks {
		if headers.IsLegRequestID(e.RequestID, h.requestID) && h.target == e.Target {
			run = append(run, h.fn)
		}
	}
	l.mu.Unlock()
	for _, fn := range run {
		fn()
	}
}

// onEnd calls fn when a leg of the request and target ends.
func (l *legEnds) onEnd(requestID, target string, fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = append(l.hooks, legEndHook{requestID: requestID, target: target, fn: fn})
}

// of returns the ends of the request's legs.
func (l *legEnds) of(requestID string) []sim.LegEnd {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sim.LegEnd
	for _, e := range l.ends {
		if headers.IsLegRequestID(e.RequestID, requestID) {
			out = append(out, e)
		}
	}
	return out
}

// legsOf returns the legs of one request the simulator received.
func legsOf(s *sim.Sim, requestID string) []sim.Leg {
	var out []sim.Leg
	for _, l := range s.Legs() {
		if headers.IsLegRequestID(l.Header.Get("X-Request-Id"), requestID) {
			out = append(out, l)
		}
	}
	return out
}

// targets lists the legs' targets.
func targets(legs []sim.Leg) []string {
	out := make([]string, len(legs))
	for i, l := range legs {
		out[i] = legTarget(l)
	}
	return out
}

// countTarget counts the legs of a fault target.
func countTarget(legs []sim.Leg, target string) int {
	n := 0
	for _, l := range legs {
		if legTarget(l) == target {
			n++
		}
	}
	return n
}

// legTarget is a leg's sim.FaultHeader target.
func legTarget(l sim.Leg) string {
	switch {
	case l.Service == sim.ServiceRender:
		return sim.FaultTargetRender
	case l.Profile == sim.FaultTargetDecode && l.Header.Get("Prefer") != "":
		return sim.FaultTargetConditional
	}
	return l.Profile
}
