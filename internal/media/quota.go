package media

import (
	"context"
	"sync/atomic"

	"github.com/coordinator-project/coordinator/internal/membudget"
)

// Quota is one request's allowance for its downloads: a cap on the bytes
// all of them may download together, and the memory budget account they
// draw what they hold from. A request's downloads share one Quota; it is
// safe for concurrent use. A nil *Quota caps nothing and draws nothing.
type Quota struct {
	max     int64 // 0 caps nothing
	used    atomic.Int64
	account *membudget.Account
}

// NewQuota is a request's allowance of max downloaded bytes (0 for no cap),
// drawing memory from account (nil for none).
func NewQuota(max int64, account *membudget.Account) *Quota {
	return &Quota{max: max, account: account}
}

// Max is the cap in bytes, 0 for none.
func (q *Quota) Max() int64 {
	if q == nil {
		return 0
	}
	return q.max
}

// count adds n downloaded bytes to the request's total; past the cap it
// fails with ErrTotalTooLarge.
func (q *Quota) count(n int64) error {
	if q == nil || q.max == 0 {
		return nil
	}
	if q.used.Add(n) > q.max {
		return newError(ErrTotalTooLarge, "the request's images exceed %d bytes in total", q.max)
	}
	return nil
}

// take draws n bytes of memory from the request's account; the error
// wraps membudget.ErrExhausted, or is ctx's cause.
func (q *Quota) take(ctx context.Context, n int64) error {
	if q == nil {
		return nil
	}
	return q.account.Take(ctx, n)
}

// give returns n bytes of memory to the request's account.
func (q *Quota) give(n int64) {
	if q != nil {
		q.account.Give(n)
	}
}

// Drop gives back the memory of img, a download the caller no longer holds
// (its request failed before using it).
func (q *Quota) Drop(img Image) { q.give(int64(len(img.Framed))) }
