package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// Linux fixes it at 100 on every architecture Go supports, whatever the
// kernel's HZ, so the bench needs no sysconf(_SC_CLK_TCK).
const clockTicks = 100

// processCPU reads utime and stime of pid from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu: %w", err)
	}
	return parseStatCPU(raw)
}

// parseStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces, so fields are counted after its closing one.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("cpu: malformed stat")
	}
	fields := strings.Fields(string(stat[i+1:])) // fields[0] is field 3
	if len(fields) < 13 {
		return 0, errors.New("cpu: short stat")
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// processSyscalls is the number of read and write system calls pid made
// (syscr + syscw in /proc/<pid>/io).
func processSyscalls(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, fmt.Errorf("syscalls: %w", err)
	}
	return parseIOSyscalls(raw)
}

// parseIOSyscalls sums syscr and syscw in a /proc/<pid>/io file.
func parseIOSyscalls(io []byte) (int64, error) {
	var n int64
	found := 0
	for line := range strings.Lines(string(io)) {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || (key != "syscr" && key != "syscw") {
			continue
		}
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("syscalls: %s: %w", key, err)
		}
		n += v
		found++
	}
	if found != 2 {
		return 0, errors.New("syscalls: no syscr and syscw")
	}
	return n, nil
}

// fleet is every process the bench started, stopped in reverse order, and
// perf when it records them.
type fleet struct {
	*procs.Group
	perf *procs.Process
}

// stopAll stops perf, then every process, the last started first.
func (f *fleet) stopAll() {
	_ = f.stopPerf()
	f.StopAll(5 * time.Second)
}

// startSim starts a simulator named name with no delays, its wire-contract
// checks on if strict.
func (f *fleet) startSim(ctx context.Context, bin, name string, strict bool) (*procs.Sim, error) {
	return f.StartSim(ctx, bin, name, procs.SimOptions{Strict: strict})
}

// startProxy starts the bare reverse proxy (this binary, self) to upstream.
func (f *fleet) startProxy(ctx context.Context, self, upstream string) (target, error) {
	addr, err := procs.FreeAddr()
	if err != nil {
		return target{}, err
	}
	p, err := f.Start("proxy", self, proxyMode, "-listen", addr, "-upstream", upstream)
	if err != nil {
		return target{}, err
	}
	base := "http://" + addr
	return target{name: "proxy", base: base, hop: p}, p.WaitReady(ctx, base+"/health", 30*time.Second)
}

// startCoordinator starts the coordinator as the target called name, on a
// generated config: pipeline p, warnings-only logs, gateway and render
// service at the simulator sim.
func (f *fleet) startCoordinator(ctx context.Context, bin, name string, sim *procs.Sim, p pipeline) (target, error) {
	listen, err := procs.FreeAddr()
	if err != nil {
		return target{}, err
	}
	grpcListen, err := procs.FreeAddr()
	if err != nil {
		return target{}, err
	}
	base := "http://" + listen
	hop, err := f.StartCoordinator(ctx, bin, "coordinator-"+name, coordinatorConfig(listen, grpcListen, sim.Gateway, sim.Render, p), base)
	return target{name: name, base: base, hop: hop, sim: sim.Process}, err
}

// startCoordinators starts one coordinator per distinct pipeline among
// the decode-only (non-cascade) scenarios, keyed by pipeline.key, each
// named "coordinator" in the report.
func (f *fleet) startCoordinators(ctx context.Context, bin string, sim *procs.Sim, scenarios []scenario) (map[string]target, error) {
	coordinators := map[string]target{}
	for _, sc := range scenarios {
		key := sc.pipeline.key()
		if _, ok := coordinators[key]; ok || sc.cascade {
			continue
		}
		t, err := f.startCoordinator(ctx, bin, strings.Join(sc.pipeline.steps, "-"), sim, sc.pipeline)
		if err != nil {
			return nil, err
		}
		t.name = "coordinator"
		coordinators[key] = t
	}
	return coordinators, nil
}

// coordinatorConfig is a coordinator config file on loopback addresses;
// render is the address of p's render step. Admission has no caps: the
// bench measures the hop, and the idle-streams probe may hold more streams
// than the default cap (2048).
func coordinatorConfig(listen, grpcListen, gateway, render string, p pipeline) []byte {
	b := fmt.Appendf(nil, `# Generated by coordinator-bench.
log_level: 1
server:
  listen_addr: %q
  grpc_listen_addr: %q
  max_concurrent_requests: 0
  max_concurrent_streams: 0
gateway:
  address: %q
  max_idle_conns_per_host: 512
pipeline:
`, listen, grpcListen, gateway)
	if p.kv != "" {
		b = fmt.Appendf(b, "  kv_connector: %s\n", p.kv)
	}
	if p.ec != "" {
		b = fmt.Appendf(b, "  ec_connector: %s\n", p.ec)
	}
	b = append(b, "  steps:\n"...)
	for _, s := range p.steps {
		b = fmt.Appendf(b, "    - type: %s\n", s)
		if s == "render" {
			b = fmt.Appendf(b, "      params:\n        address: %q\n", render)
		}
	}
	return b
}

// startPerf runs perf record on the coordinators until stopPerf.
func (f *fleet) startPerf(out string, coordinators []target) error {
	bin, err := exec.LookPath("perf")
	if err != nil {
		return fmt.Errorf("-perf: %w (Debian: apt-get install linux-perf)", err)
	}
	var pids []string
	for _, t := range coordinators {
		pids = append(pids, strconv.Itoa(t.hop.PID()))
	}
	slices.Sort(pids)
	p, err := procs.Start(f.Dir(), "perf", bin, "record", "-g", "-F", "999", "-o", out, "-p", strings.Join(pids, ","))
	if err != nil {
		return err
	}
	f.perf = p
	return nil
}

// stopPerf ends perf record, which then writes its file. It fails if perf
// had already exited on its own.
func (f *fleet) stopPerf() error {
	p := f.perf
	if p == nil {
		return nil
	}
	f.perf = nil
	select {
	case <-p.Done():
		return fmt.Errorf("perf exited early (%v):\n%s", p.Err(), p.LogTail())
	default:
	}
	p.Stop(30 * time.Second)
	return nil
}
