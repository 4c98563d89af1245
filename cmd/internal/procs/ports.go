package procs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreeAddr is a 127.0.0.1 address for a child to listen on, with a port
// nothing else on the machine takes between this call and the child's bind:
//
//   - the port is below the kernel's ephemeral range
//     (net.ipv4.ip_local_port_range), so no ":0" listener and no outbound
//     connection of any process is ever given it;
//   - it is claimed for the life of this process by an abstract Unix socket
//     named after it, so two tools (or two FreeAddr calls) never pick the
//     same port; the kernel drops the claim when the process exits;
//   - it was free when claimed (a bind to it succeeded).
//
// Only a process that binds that very port by number could still take it.
func FreeAddr() (string, error) {
	low, high := claimRange()
	return claimFirst(func() int { return low + rand.IntN(high-low) })
}

// claimFirst claims the first port of next's that is free: not claimed by
// any process and bindable. A port found bound stays claimed, so it is not
// tried again.
func claimFirst(next func() int) (string, error) {
	for range maxClaimTries {
		port := next()
		if !claim(port) {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken by number
		}
		if err := l.Close(); err != nil {
			return "", err
		}
		return addr, nil
	}
	return "", errors.New("procs: no free port below the ephemeral range")
}

// maxClaimTries bounds FreeAddr's search.
const maxClaimTries = 1000

// claimFloor is the lowest port FreeAddr hands out: above the usual fixed
// service ports (8080, 9090, ...).
const claimFloor = 20000

// claimRange is [claimFloor, the ephemeral range's first port).
func claimRange() (low, high int) {
	high = 32768 // Linux's default
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				high = n
			}
		}
	}
	if high-claimFloor < 1000 { // a machine whose ephemeral range starts low
		return 10000, max(high, 11000)
	}
	return claimFloor, high
}

var (
	claimsMu sync.Mutex
	claims   = map[int]net.Listener{} // kept open for the process's life
)

// claim takes port for this process: false when another process (or an
// earlier call) has it.
func claim(port int) bool {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if _, ok := claims[port]; ok {
		return false
	}
	l, err := net.Listen("unix", fmt.Sprintf("@coordinator-procs-port-%d", port))
	if err != nil {
		return false
	}
	claims[port] = l
	return true
}

// release drops this process's claim of port (tests: as if the process had
// exited).
func release(port int) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if l, ok := claims[port]; ok {
		_ = l.Close()
		delete(claims, port)
	}
}
