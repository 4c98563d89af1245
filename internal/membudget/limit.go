package membudget

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the process's memory limit the default budget
// takes: the rest is the Go runtime's headroom (the collector lets the heap
// grow past what is live), the binary, stacks, and what is not drawn from
// the budget (connections, small requests' bookkeeping).
const Share = 0.5

// DefaultLimit is the budget the process keeps when none is configured:
// Share of its memory limit, which is the smallest of GOMEMLIMIT (as the
// runtime holds it), the container's (cgroup v2 memory.max, or v1
// memory.limit_in_bytes) and the machine's memory (MemTotal); 0 (no
// budget) when none can be read.
func DefaultLimit() int64 {
	return defaultLimit(debug.SetMemoryLimit(-1), os.ReadFile)
}

// defaultLimit is DefaultLimit with the runtime's limit and the file
// reader given.
func defaultLimit(goLimit int64, read func(string) ([]byte, error)) int64 {
	limit := int64(math.MaxInt64)
	if goLimit > 0 {
		limit = goLimit
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if n, ok := readBytes(read, f); ok {
			limit = min(limit, n)
		}
	}
	if n, ok := memTotal(read); ok {
		limit = min(limit, n)
	}
	if limit == math.MaxInt64 {
		return 0
	}
	return int64(float64(limit) * Share)
}

// readBytes reads a cgroup limit file: a byte count, or "max" (none). The
// v1 file says "no limit" with a page-rounded MaxInt64, which MemTotal
// then undercuts.
func readBytes(read func(string) ([]byte, error), name string) (int64, bool) {
	b, err := read(name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n, err == nil && n > 0
}

// memTotal is the machine's memory from /proc/meminfo.
func memTotal(read func(string) ([]byte, error)) (int64, bool) {
	b, err := read("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		return kb << 10, err == nil && kb > 0
	}
	return 0, false
}
