package asyncbroker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordinator-project/coordinator/steps"
)

// Wait-mode cadences (compat §7.7).
const (
	// pollInterval is how often a wait looks at its mailbox without
	// notifications.
	pollInterval = 200 * time.Millisecond
	// backupPollInterval is the slow look under notifications, which are
	// fire and forget: a lost one (Redis restarting, say) costs at most
	// this much.
	backupPollInterval = 2 * time.Second
)

// wait holds the client until the request's result lands (delivered, then
// the mailbox deleted), its deadline passes (504 after a last look) or the
// wait cap ends the hold first (202 pending, still fetchable). A client
// that goes away gets nothing; its request is cancelled for the processor.
// A Redis failure while holding is not an answer: the wait keeps looking
// until the hold ends.
func (b *Broker) wait(ctx context.Context, rc *steps.RequestContext, tenant string, deadline time.Duration) error {
	hold, atDeadline := deadline, true
	if b.waitCap > 0 && b.waitCap < deadline {
		hold, atDeadline = b.waitCap, false
	}
	holdCtx, stop := context.WithTimeout(ctx, hold)
	defer stop()

	every := b.pollEvery
	var wake <-chan struct{}
	if b.notifier != nil {
		ch, leave, err := b.notifier.register(holdCtx, resultKey(tenant, rc.RequestID))
		if err == nil {
			defer leave()
			wake, every = ch, b.backupPollEvery
		} else if holdCtx.Err() == nil {
			b.log.DebugContext(ctx, "async-broker: keyspace notifications unavailable, polling", "error", err)
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for holdCtx.Err() == nil {
		if a, found, _ := b.result(holdCtx, tenant, rc.RequestID); found {
			return b.deliver(ctx, rc, tenant, a)
		}
		if b.parked != nil {
			b.parked()
		}
		select {
		case <-holdCtx.Done():
		case <-wake:
		case <-tick.C:
		}
	}
	if ctx.Err() != nil {
		b.cancel(ctx, tenant, rc.RequestID)
		return fmt.Errorf("async-broker: client left a wait: %w", context.Cause(ctx))
	}
	if !atDeadline {
		return b.answer(rc, pendingAnswer(rc.RequestID))
	}
	last, stopLast := context.WithTimeout(ctx, cleanupTimeout)
	defer stopLast()
	if a, found, _ := b.result(last, tenant, rc.RequestID); found {
		return b.deliver(ctx, rc, tenant, a)
	}
	return deadlineExceeded()
}

// deliver answers a held client with its result, then deletes the
// mailbox: the held connection was the result's only consumer. A result
// the sink refused stays fetchable; a stored failure is returned to the
// service (a refusal) once the mailbox is deleted.
func (b *Broker) deliver(ctx context.Context, rc *steps.RequestContext, tenant string, a steps.Answer) error {
	answered := b.answer(rc, a)
	if a.Refusal == nil && !errors.Is(answered, steps.ErrDone) {
		return answered
	}
	dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	if err := b.rdb.Del(dctx, resultKey(tenant, rc.RequestID)).Err(); err != nil {
		b.log.WarnContext(ctx, "async-broker: delete delivered result", "request_id", rc.RequestID, "tenant", tenant, "error", err)
	}
	return answered
}
