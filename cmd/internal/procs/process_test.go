package procs

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartLogsAndExitStatus(t *testing.T) {
	t.Setenv("COORDINATOR_LOG_LEVEL", "5")
	g := NewGroup(t.TempDir())
	p, err := g.Start("child", "/bin/sh", "-c", `echo "out ${COORDINATOR_LOG_LEVEL:-unset}"; echo err >&2; exit 3`)
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("child did not exit")
	}
	require.Error(t, p.Err())
	assert.Equal(t, "out unset\nerr", p.LogTail(), "COORDINATOR_* dropped, both streams logged")
	g.StopAll(time.Second) // already exited: no-op
}

func TestStopEndsARunningChild(t *testing.T) {
	t.Parallel()
	g := NewGroup(t.TempDir())
	p, err := g.Start("sleeper", "/bin/sleep", "60")
	require.NoError(t, err)
	assert.Positive(t, p.PID())
	g.StopAll(5 * time.Second)
	select {
	case <-p.Done():
	default:
		t.Fatal("StopAll returned before the child exited")
	}
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	ids := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids <- r.Header.Get("X-Request-Id")
	}))
	defer srv.Close()
	g := NewGroup(t.TempDir())
	defer g.StopAll(5 * time.Second)
	alive, err := g.Start("alive", "/bin/sleep", "60")
	require.NoError(t, err)
	require.NoError(t, alive.WaitReady(t.Context(), srv.URL, 10*time.Second))
	assert.Equal(t, readyRequestID, <-ids)

	dead, err := g.Start("dead", "/bin/sh", "-c", "echo bye; exit 1")
	require.NoError(t, err)
	err = dead.WaitReady(t.Context(), "http://127.0.0.1:1/never", 10*time.Second)
	require.ErrorContains(t, err, "dead exited")
	assert.ErrorContains(t, err, "bye", "the log's tail explains")
}

// TestFreeAddr checks what FreeAddr guarantees without racing anything:
// each call claims a port of its own below the ephemeral range, the claim
// is visible to every process, and a port bound by number is skipped. (A
// second bind of the returned address here would race any process that
// binds ports by number, which FreeAddr cannot exclude: the child's own
// bind is the check, and a tool reports its failure.)
func TestFreeAddr(t *testing.T) {
	t.Parallel()
	low, high := claimRange()
	seen := map[string]bool{}
	for range 50 {
		addr, err := FreeAddr()
		require.NoError(t, err)
		assert.False(t, seen[addr], "each call claims a port of its own: %s", addr)
		seen[addr] = true
		_, portText, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(portText)
		require.NoError(t, err)
		assert.True(t, port >= low && port < high, "port %d below the ephemeral range [%d, %d)", port, low, high)
		_, err = net.Listen("unix", "@coordinator-procs-port-"+portText)
		require.Error(t, err, "the port's claim is held, for every process")
	}
}

func TestFreeAddrSkipsAPortBoundByNumber(t *testing.T) {
	t.Parallel()
	// An unclaimed port of the range, bound by number here; its claim
	// released as a process exiting would, then offered first.
	taken, err := FreeAddr()
	require.NoError(t, err)
	bound, err := net.Listen("tcp", taken)
	require.NoError(t, err)
	defer bound.Close()
	port := portOf(t, taken)
	release(port)
	low, high := claimRange()
	offered := []int{}
	got, err := claimFirst(func() int {
		p := port
		if len(offered) > 0 {
			p = low + rand.IntN(high-low)
		}
		offered = append(offered, p)
		return p
	})
	require.NoError(t, err)
	assert.Equal(t, port, offered[0], "the bound port was offered first")
	assert.NotEqual(t, taken, got, "and skipped")
	_, err = net.Listen("unix", "@coordinator-procs-port-"+strconv.Itoa(port))
	require.Error(t, err, "the skipped port stays claimed, so it is not tried again")
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, text, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(text)
	require.NoError(t, err)
	return port
}
