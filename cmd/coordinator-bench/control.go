package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// The control-fanout probe measures what the control plane adds to a call
// that fans out to a large fleet. A simulator of its own serves
// controlEnginesPerRole prefill and as many decode engines, each on its own
// loopback port; a coordinator has them as its static membership, with
// control.concurrency the fleet's size. Each round times, for Pause and
// then Resume, the ControlService call over gRPC (plaintext, warm
// connection) and the same engine route fanned out from this process to
// every engine at once with a plain HTTP client on warm connections: its
// slowest answer is the floor of any fan-out on this machine. The added
// time of a round is the call's time minus the direct fan-out's; the two
// run in turn, their order swapped every round. Goal (issue): at most
// controlAddedGoal added over the slowest engine's answer.

// Parameters and goal of the control-fanout probe.
const (
	controlEnginesPerRole = 128
	controlWarmupRounds   = 10
	controlAddedGoal      = 5 * time.Millisecond
	controlCallTimeout    = 30 * time.Second
)

// controlRoutes are the routes a round calls, in order: the call names
// the ControlService method, path the engine route it fans out to.
var controlRoutes = []struct{ call, path string }{
	{"Pause", "/pause"},
	{"Resume", "/resume"},
}

// controlRouteResult is one route's samples, one per round.
type controlRouteResult struct {
	Call   string          `json:"call"`
	Direct []time.Duration `json:"direct_slowest_ns"`
	Calls  []time.Duration `json:"call_ns"`
}

// controlResult is what the control-fanout probe measured.
type controlResult struct {
	Engines     int                  `json:"engines"`
	Concurrency int                  `json:"control_concurrency"`
	Rounds      int                  `json:"rounds"`
	Routes      []controlRouteResult `json:"routes"`
	// CPUPerCall is the coordinator's CPU over the measured rounds, per
	// control call; DirectCPU this process's during the direct fan-outs,
	// per fan-out.
	CPUPerCall time.Duration `json:"coordinator_cpu_per_call_ns"`
	DirectCPU  time.Duration `json:"direct_cpu_per_fanout_ns"`
	Err        string        `json:"error,omitempty"`
}

// controlSimName names the control-fanout probe's simulator.
const controlSimName = "sim-control"

// runControlFanOut runs the control-fanout probe with rounds measured
// rounds on processes of its own, which it stops afterwards.
func runControlFanOut(ctx context.Context, f *fleet, coordinatorBin, simBin string, rounds int, progress io.Writer) (*controlResult, error) {
	r := &controlResult{Engines: 2 * controlEnginesPerRole, Concurrency: 2 * controlEnginesPerRole, Rounds: rounds}
	sim, engines, err := startEngineSim(ctx, f, simBin)
	if err != nil {
		return r, err
	}
	defer sim.Stop(5 * time.Second)
	coordinator, controlAddr, err := startControlCoordinator(ctx, f, coordinatorBin, sim, engines)
	if err != nil {
		return r, err
	}
	defer coordinator.hop.Stop(5 * time.Second)
	conn, err := grpc.NewClient("passthrough:///"+controlAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return r, err
	}
	defer conn.Close()
	m := &controlMeasurer{client: coordinatorv1.NewControlServiceClient(conn), direct: newDirectFanOut(engines)}
	defer m.direct.close()
	fmt.Fprintf(progress, "control fan-out: %d engines, %d warm-up and %d measured rounds...\n", len(engines), controlWarmupRounds, rounds)
	if _, err := m.rounds(ctx, controlWarmupRounds); err != nil {
		return r, coordinator.failed(fmt.Errorf("warm-up: %w", err))
	}
	before, err := processCPU(coordinator.hop.PID())
	if err != nil {
		return r, err
	}
	m.directCPU = 0
	if r.Routes, err = m.rounds(ctx, rounds); err != nil {
		return r, coordinator.failed(err)
	}
	after, err := processCPU(coordinator.hop.PID())
	if err != nil {
		return r, err
	}
	r.CPUPerCall = (after - before) / time.Duration(rounds*len(controlRoutes))
	r.DirectCPU = m.directCPU / time.Duration(rounds*len(controlRoutes))
	return r, nil
}

// simEngine is one entry of the simulator's --engines-file.
type simEngine struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Address string `json:"address"`
}

// startEngineSim starts the simulator with controlEnginesPerRole prefill
// and decode engines, each listening on a free loopback port, and returns
// those engines (not the one encode engine it always has).
func startEngineSim(ctx context.Context, f *fleet, simBin string) (*procs.Sim, []simEngine, error) {
	gatewayAddr, err := procs.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	renderAddr, err := procs.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(f.Dir(), controlSimName+"-engines.json")
	n := fmt.Sprint(controlEnginesPerRole)
	p, err := f.Start(controlSimName, simBin, "--gateway-addr", gatewayAddr, "--render-addr", renderAddr,
		"--ttft", "0", "--token-delay", "0", "--strict=false", "--engine-listen", "127.0.0.1:0", "--engines-file", file,
		"--prefill-engines", n, "--decode-engines", n)
	if err != nil {
		return nil, nil, err
	}
	sim := &procs.Sim{Process: p, Gateway: "http://" + gatewayAddr, Render: "http://" + renderAddr}
	// The simulator writes the file before it serves its gateway.
	if err := p.WaitReady(ctx, sim.Gateway+"/health", time.Minute); err != nil {
		return sim, nil, err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return sim, nil, err
	}
	engines, err := parseEngines(raw)
	return sim, engines, err
}

// parseEngines decodes an --engines-file and keeps its prefill and decode
// engines; it fails unless there are controlEnginesPerRole of each, each
// with an address.
func parseEngines(raw []byte) ([]simEngine, error) {
	var all []simEngine
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("engines file: %w", err)
	}
	var out []simEngine
	count := map[string]int{}
	for _, e := range all {
		if e.Role != "prefill" && e.Role != "decode" {
			continue
		}
		if _, _, err := net.SplitHostPort(e.Address); err != nil {
			return nil, fmt.Errorf("engines file: %s: address %q", e.ID, e.Address)
		}
		count[e.Role]++
		out = append(out, e)
	}
	if count["prefill"] != controlEnginesPerRole || count["decode"] != controlEnginesPerRole {
		return nil, fmt.Errorf("engines file: want %d prefill and %d decode engines, got %d and %d",
			controlEnginesPerRole, controlEnginesPerRole, count["prefill"], count["decode"])
	}
	return out, nil
}

// startControlCoordinator starts a decode-only coordinator whose control
// listener has engines as its static membership, and returns it and the
// control listener's address.
func startControlCoordinator(ctx context.Context, f *fleet, bin string, sim *procs.Sim, engines []simEngine) (target, string, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := procs.FreeAddr()
		if err != nil {
			return target{}, "", err
		}
		addrs[i] = a
	}
	cfg := coordinatorConfig(addrs[0], addrs[1], sim.Gateway, sim.Render, decodeOnly)
	cfg = append(cfg, controlConfig(addrs[2], engines)...)
	base := "http://" + addrs[0]
	hop, err := f.StartCoordinator(ctx, bin, "coordinator-control", cfg, base)
	return target{name: "coordinator", base: base, hop: hop, sim: sim.Process}, addrs[2], err
}

// controlConfig is the control section of the probe's coordinator: its
// listener on listen, the engines as its static membership, all of them
// called at once.
func controlConfig(listen string, engines []simEngine) []byte {
	b := fmt.Appendf(nil, "control:\n  listen_addr: %q\n  concurrency: %d\n  membership:\n    static:\n", listen, len(engines))
	for _, e := range engines {
		b = fmt.Appendf(b, "      - role: %s\n        address: %q\n", e.Role, e.Address)
	}
	return b
}

// controlMeasurer runs rounds of control calls and direct fan-outs.
type controlMeasurer struct {
	client coordinatorv1.ControlServiceClient
	direct *directFanOut
	// directCPU sums this process's CPU over the direct fan-outs.
	directCPU time.Duration
}

// rounds runs n rounds and returns each route's samples.
func (m *controlMeasurer) rounds(ctx context.Context, n int) ([]controlRouteResult, error) {
	out := make([]controlRouteResult, len(controlRoutes))
	for i, r := range controlRoutes {
		out[i].Call = r.call
	}
	for round := range n {
		for i, r := range controlRoutes {
			var direct, call time.Duration
			var err error
			if round%2 == 0 {
				direct, err = m.fanOut(ctx, r.path)
				if err == nil {
					call, err = m.call(ctx, r.call)
				}
			} else {
				call, err = m.call(ctx, r.call)
				if err == nil {
					direct, err = m.fanOut(ctx, r.path)
				}
			}
			if err != nil {
				return out, fmt.Errorf("round %d, %s: %w", round, r.call, err)
			}
			out[i].Direct = append(out[i].Direct, direct)
			out[i].Calls = append(out[i].Calls, call)
		}
	}
	return out, nil
}

// fanOut runs the direct fan-out of path and adds this process's CPU
// over it to directCPU.
func (m *controlMeasurer) fanOut(ctx context.Context, path string) (time.Duration, error) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		return 0, err
	}
	took, err := m.direct.run(ctx, path)
	if err != nil {
		return 0, err
	}
	after, err := processCPU(os.Getpid())
	m.directCPU += after - before
	return took, err
}

// call times one ControlService call to every worker; it fails unless
// every engine answered ok.
func (m *controlMeasurer) call(ctx context.Context, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, controlCallTimeout)
	defer cancel()
	start := time.Now()
	var results []*coordinatorv1.WorkerResult
	switch name {
	case "Pause":
		resp, err := m.client.Pause(ctx, &coordinatorv1.PauseRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return 0, err
		}
		results = resp.GetResults()
	case "Resume":
		resp, err := m.client.Resume(ctx, &coordinatorv1.ResumeRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return 0, err
		}
		results = resp.GetResults()
	default:
		return 0, fmt.Errorf("unknown control call %q", name)
	}
	elapsed := time.Since(start)
	if len(results) != len(m.direct.addrs) {
		return 0, fmt.Errorf("%d results for %d engines", len(results), len(m.direct.addrs))
	}
	for _, res := range results {
		if !res.GetOk() {
			return 0, fmt.Errorf("%s: %s", res.GetWorker().GetId(), res.GetError())
		}
	}
	return elapsed, nil
}

// directFanOut calls an engine route on every engine at once from this
// process, on connections kept warm from one fan-out to the next.
type directFanOut struct {
	client    *http.Client
	transport *http.Transport
	addrs     []string
}

func newDirectFanOut(engines []simEngine) *directFanOut {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        0, // no limit: one warm connection per engine
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	d := &directFanOut{client: &http.Client{Transport: t, Timeout: controlCallTimeout}, transport: t}
	for _, e := range engines {
		d.addrs = append(d.addrs, e.Address)
	}
	return d
}

func (d *directFanOut) close() { d.transport.CloseIdleConnections() }

// run POSTs path to every engine at once and returns the time from the
// start to the slowest engine's complete 200 answer.
func (d *directFanOut) run(ctx context.Context, path string) (time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for _, addr := range d.addrs {
		wg.Go(func() {
			if err := d.post(ctx, "http://"+addr+path); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}

func (d *directFanOut) post(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
