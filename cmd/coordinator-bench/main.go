// Command coordinator-bench measures what the coordinator adds to a request
// over a bare reverse proxy. On loopback it starts the simulator (zero TTFT
// and token delay), a bare httputil.ReverseProxy in front of it (this binary
// re-executed in a hidden -proxy mode) and the coordinator with a generated
// decode-only config, each as its own process, and sends every scenario at
// every concurrency to the three targets: direct (the simulated gateway),
// proxy and coordinator. It prints, per scenario and concurrency, the p50
// and p99 time to first byte, the p50 time to the end of the answer, the
// latency each hop adds over direct, and the CPU each hop process spent per
// request; then a summary against the target: the coordinator's added p50
// at most 1.5x the bare proxy's.
//
// The cascade-* scenarios (a 1 MB inline image, a 32k-token prompt) compare
// instead a coordinator running the full cascade of config/dev.yaml with a
// decode-only one, on a second, strict simulator that also serves render;
// every request carries its own prompt and a tripwire makes any request that
// skipped prefill fail (see cascade.go). They report both coordinators'
// TTFB and CPU per request, their ratio and the simulator's CPU per request.
//
// The control-fanout probe times the ControlService's Pause and Resume over
// gRPC to 256 simulated engines, each on its own port, against the same
// engine route fanned out directly from the bench: the time the control
// plane adds over the slowest engine's answer (control.go).
//
//	go run ./cmd/coordinator-bench [-duration 8s] [-concurrency 4,64] [-cascade-concurrency 4] [-scenarios chat,chat-stream,...] [-control-rounds 200] [-json out.json]
//
// It is not a test: it exits non-zero only when it cannot measure (a build
// or start failure, a failed request), not when the target is missed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == proxyMode {
		if err := runProxy(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "coordinator-bench -proxy:", err)
			os.Exit(1)
		}
		return
	}
	procs.Main("coordinator-bench", run)
}

// options are the parsed flags.
type options struct {
	duration           time.Duration
	warmup             time.Duration
	rounds             int
	maxRequests        int
	concurrency        []int
	cascadeConcurrency []int
	scenarios          []scenario
	jsonPath           string
	perfPath           string
	idleStreams        int
	controlRounds      int
}

func parseFlags(args []string, out io.Writer) (options, error) {
	fs := flag.NewFlagSet("coordinator-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	var o options
	fs.DurationVar(&o.duration, "duration", 8*time.Second, "measured time per target per cell (scenario x concurrency), split over the rounds")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up per target per cell")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds per cell, each visiting direct, proxy, coordinator in turn")
	fs.IntVar(&o.maxRequests, "requests", 20000, "measured requests per target per cell at most")
	conc := fs.String("concurrency", "4,64", "comma-separated numbers of concurrent requests")
	cascadeConc := fs.String("cascade-concurrency", "4", "comma-separated numbers of concurrent requests of the cascade-* scenarios")
	names := fs.String("scenarios", scenarioNames(), "comma-separated scenarios")
	fs.StringVar(&o.jsonPath, "json", "", "write the raw results (every sample, in ns) as JSON to this file")
	fs.StringVar(&o.perfPath, "perf", "", "record the coordinator with perf record -g into this `file`")
	fs.IntVar(&o.idleStreams, "idle-streams", 1000, "streams the idle-streams probe holds open")
	fs.IntVar(&o.controlRounds, "control-rounds", 200, "measured rounds of the control-fanout probe (a Pause and a Resume each)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.duration <= 0 || o.warmup < 0 || o.rounds < 1 || o.maxRequests < o.rounds || o.idleStreams < 1 || o.controlRounds < 1 {
		return o, errors.New("-duration must be positive, -warmup not negative, -rounds at least 1, -requests at least -rounds, -idle-streams and -control-rounds at least 1")
	}
	var err error
	if o.concurrency, err = parseInts(*conc); err != nil {
		return o, fmt.Errorf("-concurrency: %w", err)
	}
	if o.cascadeConcurrency, err = parseInts(*cascadeConc); err != nil {
		return o, fmt.Errorf("-cascade-concurrency: %w", err)
	}
	if o.scenarios, err = selectScenarios(*names); err != nil {
		return o, fmt.Errorf("-scenarios: %w", err)
	}
	return o, nil
}

// parseInts parses a comma list of positive integers.
func parseInts(list string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("want positive integers, got %q", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "coordinator-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintln(stderr, "building the coordinator and the simulator...")
	coordinatorBin, simBin, err := procs.Build(ctx, dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := &fleet{Group: procs.NewGroup(dir)}
	defer env.stopAll()
	hopScenarios, cascadeScenarios, probes := splitScenarios(o.scenarios)
	ts, err := env.startTargets(ctx, coordinatorBin, simBin, self, hopScenarios, len(cascadeScenarios) > 0)
	if err != nil {
		return err
	}

	l := &loader{
		client:      newClient(max(256, slices.Max(o.concurrency), slices.Max(o.cascadeConcurrency))),
		warmup:      o.warmup,
		duration:    o.duration,
		rounds:      o.rounds,
		maxRequests: o.maxRequests,
	}
	if o.perfPath != "" {
		if err := env.startPerf(o.perfPath, ts.all); err != nil {
			return err
		}
	}

	writeHeader(stdout, o, hopScenarios)
	m := &measurer{ctx: ctx, l: l, stdout: stdout, stderr: stderr}
	if err := m.hops(hopScenarios, o.concurrency, ts); err != nil {
		return err
	}
	// The cascade's preflight runs only now, so that the hop scenarios
	// above run next to idle cascade processes that never served anything.
	m.cascade(cascadeScenarios, o, ts.cascade)
	m.res.perfErr = env.stopPerf()
	m.res.probes, m.res.probeErr = l.runProbes(ctx, env, probeBins{coordinatorBin, simBin, self}, probes, o, stderr)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return m.res.report(stdout, o)
}

// targets are the processes a run measures.
type targets struct {
	// direct, proxy and coordinators (by pipeline key) serve the hop
	// scenarios; cascade the cascade ones.
	direct, proxy target
	coordinators  map[string]target
	cascade       []target
	all           []target // every coordinator, for perf
}

// startTargets starts the simulator, the proxy and a coordinator per
// pipeline of the hop scenarios when there are some, and the cascade's
// processes when withCascade.
func (f *fleet) startTargets(ctx context.Context, coordinatorBin, simBin, self string, hop []scenario, withCascade bool) (targets, error) {
	var ts targets
	if len(hop) > 0 {
		sim, err := f.startSim(ctx, simBin, "sim", false)
		if err != nil {
			return ts, err
		}
		ts.direct = target{name: "direct", base: sim.Gateway, sim: sim.Process}
		if ts.proxy, err = f.startProxy(ctx, self, sim.Gateway); err != nil {
			return ts, err
		}
		ts.proxy.sim = sim.Process
		if ts.coordinators, err = f.startCoordinators(ctx, coordinatorBin, sim, hop); err != nil {
			return ts, err
		}
		for _, t := range ts.coordinators {
			ts.all = append(ts.all, t)
		}
	}
	if withCascade {
		var err error
		if ts.cascade, err = f.startCascade(ctx, coordinatorBin, simBin); err != nil {
			return ts, err
		}
		ts.all = append(ts.all, ts.cascade...)
	}
	return ts, nil
}

// results are what a run measured, and what went wrong along the way.
type results struct {
	cells        []*cell
	failed       int // cells that failed
	preflights   []preflight
	preflightErr error
	probes       probeResults
	probeErr     error
	perfErr      error
}

// measurer measures cells and writes each as it ends.
type measurer struct {
	ctx            context.Context
	l              *loader
	stdout, stderr io.Writer
	res            results
}

// measure measures sc at each concurrency on targets, until ctx ends.
func (m *measurer) measure(sc scenario, concurrency []int, targets []target) {
	for _, conc := range concurrency {
		if m.ctx.Err() != nil {
			return
		}
		fmt.Fprintf(m.stderr, "measuring %s at %d concurrent...\n", sc.name, conc)
		c, err := m.l.runCell(m.ctx, sc, conc, targets)
		if m.ctx.Err() != nil {
			return
		}
		if err != nil {
			c.Err = err.Error()
			m.res.failed++
		}
		m.res.cells = append(m.res.cells, c)
		writeCell(m.stdout, c)
	}
}

// hops measures the hop scenarios on direct, proxy and their pipeline's
// coordinator; a scenario whose template cannot be built fails the run.
func (m *measurer) hops(scs []scenario, concurrency []int, ts targets) error {
	for _, sc := range scs {
		if sc.template == nil && sc.newTemplate != nil {
			var err error
			if sc.template, err = sc.newTemplate(); err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
		}
		m.measure(sc, concurrencyOf(sc, concurrency), []target{ts.direct, ts.proxy, ts.coordinators[sc.pipeline.key()]})
	}
	return nil
}

// cascade runs the cascade's preflight, then, when it passed, measures the
// cascade scenarios; a failed preflight is reported and kept in m.res.
func (m *measurer) cascade(scs []scenario, o options, targets []target) {
	if len(scs) > 0 && m.ctx.Err() == nil {
		m.res.preflights, m.res.preflightErr = m.l.preflights(m.ctx, scs, targets, m.stderr)
		writeCascadeHeader(m.stdout, o, m.res.preflights)
		if m.res.preflightErr != nil && m.ctx.Err() == nil {
			fmt.Fprintf(m.stdout, "\n== cascade scenarios ==\nABORTED: %v\n", m.res.preflightErr)
		}
	}
	if m.res.preflightErr == nil {
		for _, sc := range scs {
			m.measure(sc, o.cascadeConcurrency, targets)
		}
	}
}

// report writes the summaries and the JSON results, then returns the first
// failure: a probe's, perf's, the preflight's, then the failed cells.
func (r *results) report(stdout io.Writer, o options) error {
	writeSummary(stdout, r.cells)
	writeCascadeSummary(stdout, r.cells)
	writeMemory(stdout, r.probes.Memory)
	writeIdle(stdout, r.probes.Idle)
	writeControl(stdout, r.probes.Control)
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, o, r.preflights, r.cells, r.probes); err != nil {
			return err
		}
	}
	if r.probeErr != nil {
		return r.probeErr
	}
	if r.perfErr != nil {
		return r.perfErr
	}
	if o.perfPath != "" {
		fmt.Fprintf(stdout, "\nperf profile of the coordinator: perf report -i %s\n", o.perfPath)
	}
	if r.preflightErr != nil {
		return r.preflightErr
	}
	if r.failed > 0 {
		return fmt.Errorf("%d of %d cells failed", r.failed, len(r.cells))
	}
	return nil
}

// splitScenarios separates the scenarios measured on direct, proxy and
// coordinator (hop) from the cascade ones and the probes, each in table
// order.
func splitScenarios(all []scenario) (hop, cascade, probes []scenario) {
	for _, sc := range all {
		switch {
		case sc.probe != noProbe:
			probes = append(probes, sc)
		case sc.cascade:
			cascade = append(cascade, sc)
		default:
			hop = append(hop, sc)
		}
	}
	return hop, cascade, probes
}

// probeResults are what the probes measured.
type probeResults struct {
	Memory  []memoryResult `json:"memory,omitempty"`
	Idle    *idleResult    `json:"idle_streams,omitempty"`
	Control *controlResult `json:"control_fanout,omitempty"`
}

// probeBins are the binaries the probes start.
type probeBins struct{ coordinator, sim, self string }

// runProbes runs the memory probes, then the idle-streams probe, then the
// control-fanout probe, each on processes of its own. A probe that fails
// is reported in its result; the error says some did.
func (l *loader) runProbes(ctx context.Context, f *fleet, bins probeBins, probes []scenario, o options, progress io.Writer) (probeResults, error) {
	var (
		out    probeResults
		memory []scenario
		failed int
	)
	for _, sc := range probes {
		if sc.probe == probeMemory {
			memory = append(memory, sc)
		}
	}
	if len(memory) > 0 {
		var err error
		if out.Memory, err = l.runMemoryProbes(ctx, f, bins.coordinator, bins.sim, bins.self, memory, progress); err != nil {
			return out, err
		}
		for _, r := range out.Memory {
			if r.Err != "" {
				failed++
			}
		}
	}
	for _, sc := range probes {
		if ctx.Err() != nil {
			break
		}
		var err error
		switch sc.probe {
		case probeIdleStreams:
			out.Idle, err = l.runIdleStreams(ctx, f, bins.coordinator, bins.sim, bins.self, sc, o.idleStreams, progress)
			if err != nil {
				out.Idle.Err = err.Error()
			}
		case probeControlFanOut:
			out.Control, err = runControlFanOut(ctx, f, bins.coordinator, bins.sim, o.controlRounds, progress)
			if err != nil {
				out.Control.Err = err.Error()
			}
		}
		if err != nil {
			failed++
		}
	}
	if failed > 0 {
		return out, fmt.Errorf("%d probes failed", failed)
	}
	return out, nil
}

// concurrencyOf is the scenario's own concurrencies, else def (-concurrency).
func concurrencyOf(sc scenario, def []int) []int {
	if len(sc.conc) > 0 {
		return sc.conc
	}
	return def
}
