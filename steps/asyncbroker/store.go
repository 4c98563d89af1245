package asyncbroker

import (
	"context"
	"net/http"

	"github.com/coordinator-project/coordinator/steps"
)

// TenantHeader implements steps.RequestStore.
func (b *Broker) TenantHeader() string { return b.tenantHeader }

// Lookup implements steps.RequestStore: the stored result (after which
// the mailbox lives fetch_grace_seconds more, or is deleted when that is
// 0), else 202 while the request is active, else 410. A Redis failure is
// a 500 LOOKUP_FAILED.
func (b *Broker) Lookup(ctx context.Context, tenant, id string) steps.Answer {
	if tenant == "" {
		tenant = defaultTenant
	}
	a, found, err := b.result(ctx, tenant, id)
	if err != nil {
		b.log.WarnContext(ctx, "async-broker: lookup", "request_id", id, "tenant", tenant, "error", err)
		return refused(lookupFailed())
	}
	if found {
		b.afterFetch(ctx, tenant, id)
		return a
	}
	n, err := b.rdb.Exists(ctx, activeKeyPrefix+envelopeID(tenant, id)).Result()
	switch {
	case err != nil:
		b.log.WarnContext(ctx, "async-broker: lookup", "request_id", id, "tenant", tenant, "error", err)
		return refused(lookupFailed())
	case n > 0:
		return pendingAnswer(id)
	default:
		return refused(unknownRequest())
	}
}

// afterFetch shrinks a fetched mailbox's TTL to the grace period, or
// deletes it when the grace is 0 (best effort).
func (b *Broker) afterFetch(ctx context.Context, tenant, id string) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	key := resultKey(tenant, id)
	var err error
	if b.fetchGrace > 0 {
		err = b.rdb.Expire(ctx, key, b.fetchGrace).Err()
	} else {
		err = b.rdb.Del(ctx, key).Err()
	}
	if err != nil {
		b.log.WarnContext(ctx, "async-broker: expire fetched result", "request_id", id, "tenant", tenant, "error", err)
	}
}

// Delete implements steps.RequestStore: DEL of the mailbox, 204 even when
// it was absent; a Redis failure is a 500 DELETE_FAILED.
func (b *Broker) Delete(ctx context.Context, tenant, id string) steps.Answer {
	if tenant == "" {
		tenant = defaultTenant
	}
	if err := b.rdb.Del(ctx, resultKey(tenant, id)).Err(); err != nil {
		b.log.WarnContext(ctx, "async-broker: delete", "request_id", id, "tenant", tenant, "error", err)
		return refused(deleteFailed())
	}
	return steps.Answer{Status: http.StatusNoContent}
}
