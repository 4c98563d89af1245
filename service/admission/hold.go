package admission

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordinator-project/coordinator/service/config"
)

// Outcomes of a request held during a pause
// (coordinator_held_requests_total{outcome}).
const (
	// HoldServed: the resume came within control.hold.max_wait.
	HoldServed = "served"
	// HoldTimedOut: it did not (503).
	HoldTimedOut = "timeout"
	// HoldFull: control.hold.max_requests were waiting already (503).
	HoldFull = "full"
	// HoldGone: the client left, or the drain began, while it waited.
	HoldGone = "gone"
)

// Hold keeps new inference requests at the door while the fleet is paused
// through the control plane: between Hold.Close and Hold.Open, a request
// waits for the Open, for up to control.hold.max_wait and at most
// control.hold.max_requests at once; past either bound it is refused with
// UNAVAILABLE (REST 503) and a RetryInfo (Retry-After). Open, the wait
// costs one atomic load. Safe for concurrent use.
type Hold struct {
	maxWait     time.Duration
	maxRequests int64
	outcome     func(outcome string)

	closed  atomic.Bool
	waiting atomic.Int64
	// pauses counts the Closes that started a pause.
	pauses atomic.Uint64

	mu     sync.Mutex
	opened chan struct{} // closed by Open; replaced by Close
	// shut is closed when the drain begins: held requests stop waiting.
	shut     chan struct{}
	shutOnce sync.Once

	timedOut, full *status.Status
}

// NewHold is the hold of cfg's control.hold bounds, open, counting each
// held request's outcome (nil: not counted).
func NewHold(cfg config.Config, outcome func(string)) *Hold {
	h := cfg.Control.Hold
	if outcome == nil {
		outcome = func(string) {}
	}
	retry := &errdetails.RetryInfo{RetryDelay: durationpb.New(cfg.Server.RetryAfter)}
	return &Hold{
		maxWait: h.MaxWait, maxRequests: int64(h.MaxRequests), outcome: outcome,
		opened: make(chan struct{}), shut: make(chan struct{}),
		timedOut: withRetryInfo(codes.Unavailable,
			fmt.Sprintf("the inference fleet is paused for a weight update and did not resume within control.hold.max_wait (%s), retry later", h.MaxWait), retry),
		full: withRetryInfo(codes.Unavailable,
			fmt.Sprintf("the inference fleet is paused for a weight update and control.hold.max_requests (%d) requests are waiting already, retry later", h.MaxRequests), retry),
	}
}

// Close starts holding new requests.
func (h *Hold) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed.Load() {
		h.opened = make(chan struct{})
		h.pauses.Add(1)
		h.closed.Store(true)
	}
}

// Open lets the held requests through and stops holding; it returns how
// many were waiting.
func (h *Hold) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed.Load() {
		return 0
	}
	h.closed.Store(false)
	// Counted before the waiters wake: each leaves the count as it goes
	// (a waiter joins it under h.mu, which Open holds).
	n := int(h.waiting.Load())
	close(h.opened)
	return n
}

// Closed reports whether new requests are held.
func (h *Hold) Closed() bool { return h.closed.Load() }

// Pauses is how many pauses have begun: a request that read it before a
// leg and reads another after it ran into a pause, ended or not.
func (h *Hold) Pauses() uint64 { return h.pauses.Load() }

// PausedSince reports whether a pause is in force, or one began after
// Pauses returned since.
func (h *Hold) PausedSince(since uint64) bool { return h.closed.Load() || h.pauses.Load() != since }

// Waiting is how many requests are held now.
func (h *Hold) Waiting() int { return int(h.waiting.Load()) }

// shutDown ends every wait, now and later, with refusal.
func (h *Hold) shutDown() { h.shutOnce.Do(func() { close(h.shut) }) }

// Wait returns at once while the hold is open; closed, it waits for Open,
// and fails when a bound is reached (UNAVAILABLE with RetryInfo), ctx ends
// (its error) or the drain begins (refusal, the drain's status).
func (h *Hold) Wait(ctx context.Context, refusal error) error {
	if !h.closed.Load() {
		return nil
	}
	h.mu.Lock()
	opened := h.opened
	if !h.closed.Load() {
		h.mu.Unlock()
		return nil
	}
	if h.waiting.Add(1) > h.maxRequests {
		h.waiting.Add(-1)
		h.mu.Unlock()
		h.outcome(HoldFull)
		return h.full.Err()
	}
	h.mu.Unlock()
	defer h.waiting.Add(-1)
	timer := time.NewTimer(h.maxWait)
	defer timer.Stop()
	select {
	case <-opened:
		h.outcome(HoldServed)
		return nil
	case <-timer.C:
		h.outcome(HoldTimedOut)
		return h.timedOut.Err()
	case <-ctx.Done():
		h.outcome(HoldGone)
		return status.FromContextError(context.Cause(ctx)).Err()
	case <-h.shut:
		h.outcome(HoldGone)
		return refusal
	}
}
