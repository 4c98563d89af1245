// Package membudget is the memory budget the process keeps: one count of
// the bytes that request bodies, parsed structure, downloaded media and
// buffered answers hold, shared by every request, REST and gRPC.
//
// A request draws its share through an [Account] carried on its context.
// What it cannot get at once it waits for, briefly (the budget's wait), and
// is then refused with an error wrapping [ErrExhausted], so an overloaded
// process answers 429 instead of running out of memory. An account gives
// back everything it holds when it is closed, at the end of its request.
//
// A nil *Budget and a nil *Account are valid and limit nothing: code that
// draws from the context's account needs no budget in tests.
package membudget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrExhausted is wrapped by every refusal: the budget had no room for the
// bytes asked for within its wait, or they exceed the whole budget.
var ErrExhausted = errors.New("memory budget exhausted")

// ExhaustedError is a refusal, with the figures a client and an operator
// need. It wraps ErrExhausted.
type ExhaustedError struct {
	// Want is what was asked for, Held what the request already held, InUse
	// what every request held, and Limit the budget, in bytes.
	Want, Held, InUse, Limit int64
	// Never is true when Want + Held exceeds the whole budget: waiting
	// cannot help.
	Never bool
}

func (e *ExhaustedError) Error() string {
	if e.Never {
		return fmt.Sprintf("memory budget: the request needs %s (%s more), more than the whole budget of %s",
			size(e.Held+e.Want), size(e.Want), size(e.Limit))
	}
	return fmt.Sprintf("memory budget: %s more for the request, %s of %s in use; try again shortly",
		size(e.Want), size(e.InUse), size(e.Limit))
}

// Unwrap makes errors.Is(err, ErrExhausted) hold.
func (e *ExhaustedError) Unwrap() error { return ErrExhausted }

// size writes n bytes in the largest binary unit that keeps it whole-ish.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Budget is the process's memory budget. It is safe for concurrent use.
type Budget struct {
	limit int64
	wait  time.Duration

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed, and replaced, whenever bytes come back

	refused atomic.Int64 // every refusal
	never   atomic.Int64 // the refusals of what could never fit
	peak    atomic.Int64
}

// New is a budget of limit bytes, where a request waits at most wait for
// room before it is refused. A limit of 0 or less is no budget: New
// returns nil, which limits nothing.
func New(limit int64, wait time.Duration) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit, wait: max(wait, 0), freed: make(chan struct{})}
}

// Limit is the budget in bytes, 0 for no budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is the bytes every account holds now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes in use at once since the budget was made.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// Refused counts the refusals since the budget was made.
func (b *Budget) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// RefusedNever counts the refusals of what exceeded the whole budget
// (ExhaustedError.Never), within Refused.
func (b *Budget) RefusedNever() int64 {
	if b == nil {
		return 0
	}
	return b.never.Load()
}

// Open is a new request's account, holding nothing yet.
func (b *Budget) Open() *Account {
	if b == nil {
		return nil
	}
	return &Account{b: b}
}

// take reserves n bytes for an account already holding held, waiting up
// to the budget's wait (and no longer than ctx) for room.
func (b *Budget) take(ctx context.Context, n, held int64) error {
	if held+n > b.limit {
		b.refused.Add(1)
		b.never.Add(1)
		return &ExhaustedError{Want: n, Held: held, InUse: b.InUse(), Limit: b.limit, Never: true}
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			used := b.used
			b.mu.Unlock()
			b.notePeak(used)
			return nil
		}
		freed, used := b.freed, b.used
		b.mu.Unlock()
		if timeout == nil {
			if b.wait == 0 {
				return b.refuse(n, held, used)
			}
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return b.refuse(n, held, used)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (b *Budget) refuse(n, held, used int64) error {
	b.refused.Add(1)
	return &ExhaustedError{Want: n, Held: held, InUse: used, Limit: b.limit}
}

func (b *Budget) notePeak(used int64) {
	for {
		p := b.peak.Load()
		if used <= p || b.peak.CompareAndSwap(p, used) {
			return
		}
	}
}

// give returns n bytes and wakes every waiter.
func (b *Budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// Account is one request's share of the budget. It is safe for concurrent
// use (a request's media downloads run in parallel).
type Account struct {
	b    *Budget
	held atomic.Int64
}

// Take reserves n more bytes for the request, waiting up to the budget's
// wait for room; the error wraps ErrExhausted, or is ctx's cause when the
// request ended first (or had ended: a request's account is closed when it
// ends, and a Take after that would never be given back). n ≤ 0 takes
// nothing.
func (a *Account) Take(ctx context.Context, n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if ctx.Err() != nil { // the request ended (its account may be closed): nothing more for it
		return context.Cause(ctx)
	}
	if err := a.b.take(ctx, n, a.held.Load()); err != nil {
		return err
	}
	a.held.Add(n)
	return nil
}

// Give returns n of the bytes the request holds, when it drops what they
// paid for before its end; never more than it holds.
func (a *Account) Give(n int64) {
	if a == nil || n <= 0 {
		return
	}
	for {
		h := a.held.Load()
		m := min(n, h)
		if a.held.CompareAndSwap(h, h-m) {
			a.b.give(m)
			return
		}
	}
}

// Held is what the request holds now.
func (a *Account) Held() int64 {
	if a == nil {
		return 0
	}
	return a.held.Load()
}

// Close returns everything the request holds. The account can be used
// again afterwards (a later Take draws anew); closing twice is harmless.
func (a *Account) Close() {
	if a == nil {
		return
	}
	a.b.give(a.held.Swap(0))
}

type accountKey struct{}

// WithAccount is ctx carrying the request's account.
func WithAccount(ctx context.Context, a *Account) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, accountKey{}, a)
}

// FromContext is the account ctx carries, nil (limiting nothing) when none.
func FromContext(ctx context.Context) *Account {
	a, _ := ctx.Value(accountKey{}).(*Account)
	return a
}

// ParseShare is what a request draws, per byte of its body, besides the
// body's own bytes: its parse (the document's index, 0.0–0.25× the body
// for ordinary chat and completions bodies, measured), the legs' copies
// (none: the legs are written from the body by reference) and the
// transport's buffers (a gRPC message's received bytes while it is
// unmarshalled). A body of n bytes draws 1+ParseShare times n in all.
const ParseShare = 1

// BodyCharge is what a request whose body holds n bytes draws for the
// body and what it makes of it: n × (1 + ParseShare).
func BodyCharge(n int64) int64 { return n * (1 + ParseShare) }
