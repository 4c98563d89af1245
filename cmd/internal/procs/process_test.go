package procs

import (
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
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the address is free for the child")
		require.NoError(t, l.Close())
	}
}

func TestFreeAddrClaimsAcrossProcesses(t *testing.T) {
	t.Parallel()
	addr, err := FreeAddr()
	require.NoError(t, err)
	_, portText, _ := net.SplitHostPort(addr)
	// Any FreeAddr, in this process or another, finds the claim taken.
	_, err = net.Listen("unix", "@coordinator-procs-port-"+portText)
	require.Error(t, err, "the port's claim is held")
}
