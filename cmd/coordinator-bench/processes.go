package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// Linux fixes it at 100 on every architecture Go supports, whatever the
// kernel's HZ, so the bench needs no sysconf(_SC_CLK_TCK).
const clockTicks = 100

// process is a child the bench started and stops.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string        // path of the file holding its stdout and stderr
	done chan struct{} // closed once it exited
	err  error         // its exit status, once done is closed
}

// startProcess starts bin with args, its output going to dir/name.log.
// COORDINATOR_* variables are dropped from its environment so they cannot
// override the generated config. The child gets SIGKILL if the bench dies.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDINATOR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop asks the process to exit (SIGTERM), then kills it after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu is the CPU time (user + system, all threads) the process has used.
func (p *process) cpu() (time.Duration, error) {
	return processCPU(p.pid())
}

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

// logTail is the end of the process's output, for error messages.
func (p *process) logTail() string {
	raw, _ := os.ReadFile(p.log)
	raw = bytes.TrimSpace(raw)
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	if len(raw) == 0 {
		return "(no output)"
	}
	return string(raw)
}

// waitReady polls url until it answers 200, failing if the process exits
// or timeout passes.
func (p *process) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		// A strict simulator wants a request id on every request.
		req.Header.Set("X-Request-Id", "coordinator-bench-ready")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v):\n%s", p.name, p.err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w\n%s", p.name, url, ctx.Err(), p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeAddr is a 127.0.0.1 address with a port the kernel just had free.
// Another process could take it before the child binds it; the child then
// fails to start and the bench says so.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// build compiles the coordinator and the simulator into dir and returns
// their paths. It runs go build in the module holding the working
// directory.
func build(ctx context.Context, dir string) (coordinator, sim string, err error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == os.DevNull {
		return "", "", errors.New("run from inside the coordinator module")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
		"./cmd/coordinator", "./cmd/coordinator-sim")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return filepath.Join(dir, "coordinator"), filepath.Join(dir, "coordinator-sim"), nil
}

// fleet is every process the bench started, stopped in reverse order.
type fleet struct {
	dir   string
	procs []*process
	perf  *process
}

func (f *fleet) start(name, bin string, args ...string) (*process, error) {
	p, err := startProcess(f.dir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	f.procs = append(f.procs, p)
	return p, nil
}

// stopAll stops every process, the last started first.
func (f *fleet) stopAll() {
	_ = f.stopPerf()
	for _, p := range slices.Backward(f.procs) {
		p.stop(5 * time.Second)
	}
}

// startSim starts a simulator named name with no delays, its wire-contract
// checks on if strict, and returns it with its gateway's and its render
// service's base URLs.
func (f *fleet) startSim(ctx context.Context, bin, name string, strict bool) (p *process, gateway, render string, err error) {
	gatewayAddr, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	renderAddr, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	p, err = f.start(name, bin, "--gateway-addr", gatewayAddr, "--render-addr", renderAddr,
		"--ttft", "0", "--token-delay", "0", "--strict="+strconv.FormatBool(strict))
	if err != nil {
		return nil, "", "", err
	}
	gateway, render = "http://"+gatewayAddr, "http://"+renderAddr
	if err := p.waitReady(ctx, gateway+"/health", 30*time.Second); err != nil {
		return nil, "", "", err
	}
	return p, gateway, render, p.waitReady(ctx, render+"/health", 30*time.Second)
}

// startProxy starts the bare reverse proxy (this binary, self) to upstream.
func (f *fleet) startProxy(ctx context.Context, self, upstream string) (target, error) {
	addr, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	p, err := f.start("proxy", self, proxyMode, "-listen", addr, "-upstream", upstream)
	if err != nil {
		return target{}, err
	}
	base := "http://" + addr
	return target{name: "proxy", base: base, hop: p}, p.waitReady(ctx, base+"/health", 30*time.Second)
}

// startCoordinator starts the coordinator as the target called name, on a
// generated config: pipeline p, warnings-only logs, gateway and render
// service at the simulator sim.
func (f *fleet) startCoordinator(ctx context.Context, bin, name string, sim *process, gateway, render string, p pipeline) (target, error) {
	listen, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	grpcListen, err := freeAddr()
	if err != nil {
		return target{}, err
	}
	proc := "coordinator-" + name
	config := filepath.Join(f.dir, proc+".yaml")
	if err := os.WriteFile(config, coordinatorConfig(listen, grpcListen, gateway, render, p), 0o600); err != nil {
		return target{}, err
	}
	hop, err := f.start(proc, bin, "--config", config)
	if err != nil {
		return target{}, err
	}
	base := "http://" + listen
	return target{name: name, base: base, hop: hop, sim: sim}, hop.waitReady(ctx, base+"/readyz", 60*time.Second)
}

// startCoordinators starts one coordinator per distinct pipeline among
// the decode-only (non-cascade) scenarios, keyed by pipeline.key, each
// named "coordinator" in the report.
func (f *fleet) startCoordinators(ctx context.Context, bin string, sim *process, gateway string, scenarios []scenario) (map[string]target, error) {
	coordinators := map[string]target{}
	for _, sc := range scenarios {
		key := sc.pipeline.key()
		if _, ok := coordinators[key]; ok || sc.cascade {
			continue
		}
		t, err := f.startCoordinator(ctx, bin, strings.Join(sc.pipeline.steps, "-"), sim, gateway, "", sc.pipeline)
		if err != nil {
			return nil, err
		}
		t.name = "coordinator"
		coordinators[key] = t
	}
	return coordinators, nil
}

// coordinatorConfig is a coordinator config file on loopback addresses;
// render is the address of p's render step.
func coordinatorConfig(listen, grpcListen, gateway, render string, p pipeline) []byte {
	b := fmt.Appendf(nil, `# Generated by coordinator-bench.
log_level: 1
server:
  listen_addr: %q
  grpc_listen_addr: %q
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
		pids = append(pids, strconv.Itoa(t.hop.pid()))
	}
	slices.Sort(pids)
	p, err := startProcess(f.dir, "perf", bin, "record", "-g", "-F", "999", "-o", out, "-p", strings.Join(pids, ","))
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
	case <-p.done:
		return fmt.Errorf("perf exited early (%v):\n%s", p.err, p.logTail())
	default:
	}
	p.stop(30 * time.Second)
	return nil
}
