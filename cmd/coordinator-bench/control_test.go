package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/config"
)

// testEngines is n prefill and n decode engines at made-up addresses.
func testEngines(n int) []simEngine {
	var out []simEngine
	for _, role := range []string{"prefill", "decode"} {
		for i := range n {
			out = append(out, simEngine{ID: fmt.Sprintf("%s-%d", role, i), Role: role, Address: fmt.Sprintf("127.0.0.1:%d", 20000+len(out))})
		}
	}
	return out
}

// The probe's coordinator config loads with the coordinator's own loader:
// the control listener on its address, every engine in the static
// membership, all called at once.
func TestControlConfigLoads(t *testing.T) {
	t.Parallel()
	engines := testEngines(controlEnginesPerRole)
	raw := coordinatorConfig("127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:4", "http://127.0.0.1:3", decodeOnly)
	raw = append(raw, controlConfig("127.0.0.1:5", engines)...)
	cfg, err := config.Parse(raw, func(string) (string, bool) { return "", false })
	require.NoError(t, err, "%s", raw)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "127.0.0.1:5", cfg.Control.ListenAddr)
	assert.Equal(t, 2*controlEnginesPerRole, cfg.Control.Concurrency)
	require.Len(t, cfg.Control.Membership.Static, len(engines))
	for i, w := range cfg.Control.Membership.Static {
		assert.Equal(t, engines[i].Role, w.Role)
		assert.Equal(t, engines[i].Address, w.Address)
	}
}

func TestParseEngines(t *testing.T) {
	t.Parallel()
	file := func(engines []simEngine) []byte {
		raw, err := json.Marshal(append([]simEngine{{ID: "encode-0", Role: "encode", Address: "127.0.0.1:19999"}}, engines...))
		require.NoError(t, err)
		return raw
	}
	all := testEngines(controlEnginesPerRole)
	got, err := parseEngines(file(all))
	require.NoError(t, err)
	assert.Equal(t, all, got, "prefill and decode, not encode, in file order")

	_, err = parseEngines(file(all[1:]))
	assert.ErrorContains(t, err, "got 127 and 128")
	bad := testEngines(controlEnginesPerRole)
	bad[3].Address = ""
	_, err = parseEngines(file(bad))
	assert.ErrorContains(t, err, "prefill-3")
	_, err = parseEngines([]byte("{"))
	assert.Error(t, err)
}

// fakeEngines are httptest engines that count the paths POSTed to them;
// status is what they answer.
type fakeEngines struct {
	mu      sync.Mutex
	paths   map[string]int
	status  int
	engines []simEngine
}

func newFakeEngines(t *testing.T, n int) *fakeEngines {
	t.Helper()
	f := &fakeEngines{paths: map[string]int{}, status: http.StatusOK}
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.paths[r.Method+" "+r.URL.Path]++
			status := f.status
			f.mu.Unlock()
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		}))
		t.Cleanup(srv.Close)
		f.engines = append(f.engines, simEngine{ID: fmt.Sprintf("decode-%d", i), Role: "decode", Address: srv.Listener.Addr().String()})
	}
	return f
}

func (f *fakeEngines) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paths[key]
}

// The direct fan-out POSTs the route to every engine once per run and
// fails, naming the engine, when one answers other than 200.
func TestDirectFanOut(t *testing.T) {
	t.Parallel()
	f := newFakeEngines(t, 5)
	d := newDirectFanOut(f.engines)
	defer d.close()
	for range 3 {
		took, err := d.run(t.Context(), "/pause")
		require.NoError(t, err)
		assert.Positive(t, took)
	}
	assert.Equal(t, 15, f.count("POST /pause"))

	f.mu.Lock()
	f.status = http.StatusServiceUnavailable
	f.mu.Unlock()
	_, err := d.run(t.Context(), "/resume")
	assert.ErrorContains(t, err, "status 503")
	assert.ErrorContains(t, err, "/resume")
}

// fakeControl answers Pause and Resume with one result per worker, the
// worker bad failing.
type fakeControl struct {
	coordinatorv1.UnimplementedControlServiceServer
	workers int
	bad     string
}

func (c *fakeControl) results() []*coordinatorv1.WorkerResult {
	out := make([]*coordinatorv1.WorkerResult, c.workers)
	for i := range out {
		id := fmt.Sprintf("decode/%d", i)
		out[i] = &coordinatorv1.WorkerResult{Worker: &coordinatorv1.Worker{Id: id}, Ok: id != c.bad, Error: "engine said no"}
	}
	return out
}

func (c *fakeControl) Pause(context.Context, *coordinatorv1.PauseRequest) (*coordinatorv1.PauseResponse, error) {
	return &coordinatorv1.PauseResponse{Results: c.results()}, nil
}

func (c *fakeControl) Resume(context.Context, *coordinatorv1.ResumeRequest) (*coordinatorv1.ResumeResponse, error) {
	return &coordinatorv1.ResumeResponse{Results: c.results()}, nil
}

// serveControl serves c on a loopback port and returns a client to it.
func serveControl(t *testing.T, c *fakeControl) coordinatorv1.ControlServiceClient {
	t.Helper()
	var lc net.ListenConfig
	lis, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	coordinatorv1.RegisterControlServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return coordinatorv1.NewControlServiceClient(conn)
}

// A round calls Pause then Resume, each on the control service and
// directly on every engine; a call in which a worker failed, or that
// misses one, fails the rounds with the worker's id.
func TestControlMeasurerRounds(t *testing.T) {
	t.Parallel()
	f := newFakeEngines(t, 4)
	d := newDirectFanOut(f.engines)
	defer d.close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	m := &controlMeasurer{client: serveControl(t, &fakeControl{workers: 4}), direct: d}
	got, err := m.rounds(ctx, 3)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, want := range []string{"Pause", "Resume"} {
		assert.Equal(t, want, got[i].Call)
		assert.Len(t, got[i].Direct, 3)
		assert.Len(t, got[i].Calls, 3)
	}
	assert.Equal(t, 12, f.count("POST /pause"))
	assert.Equal(t, 12, f.count("POST /resume"))

	m.client = serveControl(t, &fakeControl{workers: 4, bad: "decode/2"})
	_, err = m.rounds(ctx, 1)
	assert.ErrorContains(t, err, "decode/2: engine said no")
	m.client = serveControl(t, &fakeControl{workers: 3})
	_, err = m.rounds(ctx, 1)
	assert.ErrorContains(t, err, "3 results for 4 engines")
}

func TestControlReport(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, n := range v {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	pause := controlRouteResult{Call: "Pause", Direct: ms(10, 20, 30), Calls: ms(12, 21, 33)}
	s := summarizeControl(pause)
	assert.Equal(t, 2*time.Millisecond, s.AddedP50, "added per round: 2, 1, 3")
	assert.Equal(t, 3*time.Millisecond, s.AddedP99)
	assert.Equal(t, 20*time.Millisecond, s.DirectP50)
	assert.Equal(t, 33*time.Millisecond, s.CallP99)

	r := &controlResult{Engines: 256, Concurrency: 256, Rounds: 3, CPUPerCall: 1500 * time.Microsecond, DirectCPU: 500 * time.Microsecond, Routes: []controlRouteResult{
		pause, {Call: "Resume", Direct: ms(10, 10, 10), Calls: ms(14, 20, 25)},
	}}
	var w bytes.Buffer
	writeControl(&w, r)
	out := w.String()
	assert.Contains(t, out, "256 engines")
	lines := strings.Split(out, "\n")
	row := func(call string) string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), call+" ") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return ""
	}
	assert.Equal(t, "Pause 3 20.00 30.00 21.00 33.00 2.00 3.00 <= 5.00 PASS PASS", row("Pause"))
	assert.Equal(t, "Resume 3 10.00 10.00 20.00 25.00 10.00 15.00 <= 5.00 FAIL FAIL", row("Resume"))
	assert.Contains(t, out, "coordinator CPU per control call: 1.50 ms; this process's per direct fan-out: 0.50 ms (3.00x)")

	w.Reset()
	writeControl(&w, &controlResult{Engines: 256, Err: "coordinator: exited\nlog tail"})
	assert.Contains(t, w.String(), "ABORTED: coordinator: exited")
	assert.NotContains(t, w.String(), "log tail")
	w.Reset()
	writeControl(&w, nil)
	assert.Empty(t, w.String())
}
