package steptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a real redis-server process for one test: on a free 127.0.0.1
// port, with a temporary working directory, no persistence (--save ""
// --appendonly no). It is stopped when the test ends.
type Redis struct {
	// Addr is host:port; URL is redis://Addr.
	Addr string
	URL  string

	t    testing.TB
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// RedisOption configures StartRedis.
type RedisOption func(*[]string)

// WithKeyspaceNotifications starts the server with notify-keyspace-events
// set to flags ("Kl": keyspace events of list commands).
func WithKeyspaceNotifications(flags string) RedisOption {
	return func(args *[]string) { *args = append(*args, "--notify-keyspace-events", flags) }
}

// StartRedis starts a redis-server and waits until it answers PING. The
// test is skipped when no redis-server binary is installed (apt-get
// install redis-server); CI installs one.
func StartRedis(t testing.TB, opts ...RedisOption) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server): skipping a test that needs a real Redis")
	}
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redis: free port: %v", err)
		}
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t}
		r.URL = "redis://" + r.Addr
		r.args = []string{
			bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--loglevel", "warning", "--logfile", "",
		}
		for _, o := range opts {
			o(&r.args)
		}
		err = r.start()
		if err == nil {
			t.Cleanup(r.Stop)
			return r
		}
		if attempt == 3 { // the port was taken each time: give up
			t.Fatalf("redis: %v", err)
		}
	}
}

// Start starts the server again after Stop, on the same port, and waits
// until it answers PING.
func (r *Redis) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatalf("redis: restart: %v", err)
	}
}

// start runs the server and waits until this process (not another one
// that took the port first) answers PING.
func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	cmd := exec.Command(r.args[0], r.args[1:]...)
	out := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := waitOwnPing(r.Addr, cmd.Process.Pid, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%s: %w\n%s", r.Addr, err, out.String())
	}
	r.cmd = cmd
	return nil
}

// Stop kills the server (as a crash would: nothing is saved) and waits
// for it to exit. Stopping a stopped server does nothing.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Client returns a client of the server, closed when the test ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort asks the kernel for a free loopback port. Another process
// could take it before redis-server binds it; Start then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitOwnPing polls addr with PING until the server with process id pid
// answers, or timeout passes.
func waitOwnPing(addr string, pid int, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		var info string
		if info, err = c.Info(ctx, "server").Result(); err == nil {
			if strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n") {
				return nil
			}
			return errors.New("another server answers on this port")
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return errors.Join(fmt.Errorf("no answer in %v", timeout), err)
}
