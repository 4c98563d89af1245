package procs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a child a tool started and stops. Name and Log are set by
// Start and not changed after.
type Process struct {
	// Name names the process in messages and its log file.
	Name string
	// Log is the path of the file holding its stdout and stderr.
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // its exit status, once done is closed
}

// Start starts bin with args, its output going to dir/name.log.
// COORDINATOR_* variables are dropped from its environment so they cannot
// override a generated config. The child gets SIGKILL if the tool dies.
func Start(dir, name, bin string, args ...string) (*Process, error) {
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
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process exited; Err is then its exit status.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status; only meaningful once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop asks the process to exit (SIGTERM), then kills it after grace.
func (p *Process) Stop(grace time.Duration) {
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

// LogTail is the end of the process's output, for error messages.
func (p *Process) LogTail() string {
	raw, _ := os.ReadFile(p.Log)
	raw = bytes.TrimSpace(raw)
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	if len(raw) == 0 {
		return "(no output)"
	}
	return string(raw)
}

// readyRequestID is the X-Request-Id of readiness probes: a strict
// simulator wants one on every request.
const readyRequestID = "procs-ready"

// WaitReady polls url until it answers 200, failing if the process exits
// or timeout passes.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Request-Id", readyRequestID)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v):\n%s", p.Name, p.err, p.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w\n%s", p.Name, url, ctx.Err(), p.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
