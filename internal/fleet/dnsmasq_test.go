//go:build linux

package fleet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logWait bounds every wait on dnsmasq's log: its start, a reread.
const logWait = 20 * time.Second

// dnsmasq is a real DNS server for the tests: Debian's dnsmasq on
// 127.0.0.1 and a free port, answering only from a hosts file the test
// rewrites (then hup). Names under fleet.test it does not know are
// NXDOMAIN; any other name is REFUSED (it has no upstream server). It is
// killed when the test ends.
type dnsmasq struct {
	addr  string // 127.0.0.1:port
	hosts string // the hosts file

	cmd  *exec.Cmd
	done chan struct{} // closed when its log (stderr) ends

	mu     sync.Mutex
	lines  []string
	notify chan struct{} // a new log line, or the end
}

// startDNSMasq starts dnsmasq answering from hosts (a hosts file's text).
// It fails the test, saying to install dnsmasq, when the binary is
// missing.
func startDNSMasq(t *testing.T, hosts string) *dnsmasq {
	t.Helper()
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/dnsmasq")
	}
	require.NoError(t, err, "the DNS membership tests run a real dnsmasq: install it (Debian: apt-get install dnsmasq-base; make test-deps does, CI runs it)")
	path := filepath.Join(t.TempDir(), "hosts")
	require.NoError(t, os.WriteFile(path, []byte(hosts), 0o644))
	for range 5 { // another process may take the free port first
		d, err := tryDNSMasq(t, bin, path, freePort(t))
		if err == nil {
			return d
		}
		require.ErrorContains(t, err, "in use")
	}
	t.Fatal("dnsmasq: no free port in 5 tries")
	return nil
}

// tryDNSMasq starts dnsmasq on 127.0.0.1:port and waits until it has read
// the hosts file (its sockets are bound by then); the error is its log
// when it exits instead.
func tryDNSMasq(t *testing.T, bin, hosts string, port int) (*dnsmasq, error) {
	args := []string{
		"--no-daemon", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--addn-hosts=" + hosts, "--local=/fleet.test/",
		fmt.Sprintf("--port=%d", port), "--listen-address=127.0.0.1", "--bind-interfaces",
		"--pid-file=", "--log-facility=-",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // not nobody, who cannot read the test's temp dir
	}
	d := &dnsmasq{
		addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), hosts: hosts,
		cmd: exec.Command(bin, args...), done: make(chan struct{}), notify: make(chan struct{}, 1),
	}
	// Its own process group, killed whole; killed too if the test binary dies.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := d.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())
	t.Cleanup(d.stop)
	go d.readLog(stderr)
	if _, ok := d.waitLog("read "+hosts, 0); !ok {
		d.stop()
		return nil, errors.New(d.log())
	}
	return d, nil
}

func (d *dnsmasq) readLog(stderr interface{ Read([]byte) (int, error) }) {
	defer close(d.done)
	s := bufio.NewScanner(stderr)
	for s.Scan() {
		d.mu.Lock()
		d.lines = append(d.lines, s.Text())
		d.mu.Unlock()
		select {
		case d.notify <- struct{}{}:
		default:
		}
	}
}

// waitLog waits for a log line containing s at index from or later; it
// returns the index after it, or false when dnsmasq exited or logWait
// passed first.
func (d *dnsmasq) waitLog(s string, from int) (int, bool) {
	deadline := time.NewTimer(logWait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		for i := from; i < len(d.lines); i++ {
			if strings.Contains(d.lines[i], s) {
				d.mu.Unlock()
				return i + 1, true
			}
		}
		from = len(d.lines)
		d.mu.Unlock()
		select {
		case <-d.notify:
		case <-d.done:
			d.mu.Lock()
			n := len(d.lines)
			d.mu.Unlock()
			if from == n {
				return 0, false
			}
		case <-deadline.C:
			return 0, false
		}
	}
}

func (d *dnsmasq) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// setHosts replaces the hosts file and has dnsmasq reread it (SIGHUP),
// returning once it has: the next query sees the new records.
func (d *dnsmasq) setHosts(t *testing.T, hosts string) {
	t.Helper()
	require.NoError(t, os.WriteFile(d.hosts, []byte(hosts), 0o644))
	d.mu.Lock()
	from := len(d.lines)
	d.mu.Unlock()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	_, ok := d.waitLog("read "+d.hosts, from)
	require.True(t, ok, "dnsmasq did not reread %s after SIGHUP; its log:\n%s", d.hosts, d.log())
}

// stop kills dnsmasq's process group and waits for it; it may run twice.
func (d *dnsmasq) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
	_ = d.cmd.Wait()
}

// resolver is a Go resolver asking only this dnsmasq.
func (d *dnsmasq) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, network, d.addr)
	}}
}

// freePort is a port free on 127.0.0.1 for both UDP and TCP, as dnsmasq
// binds both; another process may take it before dnsmasq does.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		require.NoError(t, err)
		port := pc.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
		_ = pc.Close()
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	t.Fatal("no port free for both UDP and TCP on 127.0.0.1")
	return 0
}
