package sim

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// FaultHeader selects injected faults per request; see the package doc.
const FaultHeader = "X-Sim-Fault"

// RetryAfterHeader gives the injected status faults of a request a
// Retry-After header with its value (whole seconds); see the package doc.
const RetryAfterHeader = "X-Sim-Retry-After"

// PoolHeader is on every answer of a worker or the render service: the
// pool that answered (encode, prefill, decode, render), a worker header for
// the coordinator to pass on.
const PoolHeader = "X-Sim-Pool"

// Fault targets of [FaultHeader].
const (
	FaultTargetEncode      = "encode"
	FaultTargetPrefill     = "prefill"
	FaultTargetDecode      = "decode"
	FaultTargetConditional = "conditional"
	FaultTargetRender      = "render"
)

type faultKind int

const (
	faultNone faultKind = iota
	faultStatus
	faultHang
	faultReset
	faultHangMid
	faultClose
	faultNoKV
)

// fault is one injected failure.
type fault struct {
	kind   faultKind
	status int
	// times, when above 0, limits the fault to the first times legs of a
	// request (x-request-id) and target; later legs are served normally.
	times int
}

// faultSet is the parsed [FaultHeader]: a fault per target.
type faultSet map[string]fault

// parseFaults reads [FaultHeader]; every value may hold a comma list of
// target=fault entries.
func parseFaults(h http.Header) (faultSet, *apiError) {
	if v := h.Get(RetryAfterHeader); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return nil, badRequest("sim: invalid %s %q: want whole seconds", RetryAfterHeader, v)
		}
	}
	values := h.Values(FaultHeader)
	if len(values) == 0 {
		return nil, nil
	}
	set := faultSet{}
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			target, spec, ok := strings.Cut(entry, "=")
			target = strings.ToLower(strings.TrimSpace(target))
			if !ok || !validFaultTarget(target) {
				return nil, badRequest("sim: invalid %s entry %q: want <encode|prefill|decode|conditional|render>=<fault>", FaultHeader, entry)
			}
			f, err := parseFault(strings.TrimSpace(spec))
			if err != nil {
				return nil, err
			}
			set[target] = f
		}
	}
	return set, nil
}

func validFaultTarget(t string) bool {
	switch t {
	case FaultTargetEncode, FaultTargetPrefill, FaultTargetDecode, FaultTargetConditional, FaultTargetRender:
		return true
	}
	return false
}

// parseFault reads one fault: a kind, optionally limited to the first n
// legs with a "/<n>" suffix; status-once:<code> is status:<code>/1.
func parseFault(spec string) (fault, *apiError) {
	bad := badRequest("sim: invalid %s fault %q: want status:<400-999>, status-once:<400-999>, hang, hang-mid-stream, "+
		"reset-mid-stream, close or no-kv-params, optionally followed by /<n>", FaultHeader, spec)
	kind, times := spec, 0
	if k, n, ok := strings.Cut(spec, "/"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 {
			return fault{}, bad
		}
		kind, times = k, v
	}
	f, ok := parseFaultKind(strings.ToLower(kind))
	if !ok || (f.times > 0 && times > 0) {
		return fault{}, bad
	}
	if times > 0 {
		f.times = times
	}
	return f, nil
}

// parseFaultKind reads a fault without its "/<n>" suffix.
func parseFaultKind(spec string) (fault, bool) {
	switch spec {
	case "hang":
		return fault{kind: faultHang}, true
	case "hang-mid-stream":
		return fault{kind: faultHangMid}, true
	case "reset-mid-stream":
		return fault{kind: faultReset}, true
	case "close":
		return fault{kind: faultClose}, true
	case "no-kv-params":
		return fault{kind: faultNoKV}, true
	}
	f := fault{kind: faultStatus}
	code, ok := strings.CutPrefix(spec, "status:")
	if !ok {
		code, ok = strings.CutPrefix(spec, "status-once:")
		f.times = 1
	}
	n, err := strconv.Atoi(code)
	if !ok || err != nil || n < 400 || n > 999 { // past 599: a broken worker's
		return fault{}, false
	}
	f.status = n
	return f, true
}

// target returns the fault for a leg.
func (fs faultSet) target(t string) fault {
	return fs[t]
}

// faultTarget names the target a worker leg answers to.
func faultTarget(rl role, conditional bool) string {
	if conditional {
		return FaultTargetConditional
	}
	return rl.String()
}

// inject answers the leg according to f before any real work, and reports
// whether it did. The mid-answer faults (reset, hang-mid-stream) are left to
// the response writer.
func (f fault) inject(w http.ResponseWriter, r *http.Request) bool {
	switch f.kind {
	case faultClose:
		abortConnection()
	case faultStatus:
		if v := r.Header.Get(RetryAfterHeader); v != "" {
			w.Header().Set("Retry-After", v)
		}
		writeError(w, &apiError{
			status:  f.status,
			message: "sim: injected fault status:" + strconv.Itoa(f.status),
		})
		return true
	case faultHang:
		<-r.Context().Done()
		return true
	}
	return false
}

// cutAnswer ends an answer whose first part was sent (and flushed) as f
// says: a reset aborts the connection, hang-mid-stream sends nothing more
// until ctx ends. It reports whether the answer must stop.
func (f fault) cutAnswer(ctx context.Context) bool {
	switch f.kind {
	case faultReset:
		abortConnection()
	case faultHangMid:
		<-ctx.Done()
		return true
	}
	return false
}

// dropsKV reports whether f has a prefill worker answer without
// kv_transfer_params.
func (f fault) dropsKV() bool { return f.kind == faultNoKV }

// cutsAnswer reports whether f cuts the answer after its first part.
func (f fault) cutsAnswer() bool {
	return f.kind == faultReset || f.kind == faultHangMid
}

// abortConnection ends the response abruptly: net/http closes the connection
// without logging, so the client sees a truncated body, or no answer at all
// when nothing was sent yet.
func abortConnection() {
	panic(http.ErrAbortHandler)
}

// maxFaultCounts bounds the requests whose limited faults are counted; past
// it the counts start over.
const maxFaultCounts = 10_000

// faultCounts counts, per request and target, the legs a limited fault
// (times > 0) has hit. The zero value is ready; safe for concurrent use.
type faultCounts struct {
	mu     sync.Mutex
	counts map[string]int
}

// take returns f when it still applies to this leg of requestID and
// target, counting the leg, and no fault once f's times are used up.
func (c *faultCounts) take(f fault, requestID, target string) fault {
	if f.times == 0 {
		return f
	}
	key := requestID + "\x00" + target
	c.mu.Lock()
	defer c.mu.Unlock()
	n, seen := c.counts[key]
	if c.counts == nil || (!seen && len(c.counts) >= maxFaultCounts) {
		c.counts = make(map[string]int)
	}
	c.counts[key] = n + 1
	if n < f.times {
		return f
	}
	return fault{}
}

// reset forgets every count.
func (c *faultCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}
