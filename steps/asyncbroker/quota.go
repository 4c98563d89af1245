package asyncbroker

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// quotaClass is a passthrough request's classification: within the
// tenant's reserved concurrency, or over it.
type quotaClass int

const (
	classReserved quotaClass = iota
	classOverflow
)

// acquireScript is the async processor's redis-quota gate (concurrency
// mode, classifying): at or over the limit → 0 (overflow, nothing taken);
// else take a slot and refresh the window → 1 (reserved).
//
// KEYS: counter. ARGV: limit, window seconds.
var acquireScript = redis.NewScript(`
local current = redis.call("GET", KEYS[1])
if current and tonumber(current) >= tonumber(ARGV[1]) then
  return 0
end
redis.call("INCR", KEYS[1])
redis.call("EXPIRE", KEYS[1], ARGV[2])
return 1
`)

// releaseScript gives a slot back, refreshing the window while slots
// remain taken.
//
// KEYS: counter. ARGV: window seconds.
var releaseScript = redis.NewScript(`
local current = redis.call("GET", KEYS[1])
if current and tonumber(current) > 0 then
  local remaining = redis.call("DECR", KEYS[1])
  if remaining > 0 then
    redis.call("EXPIRE", KEYS[1], ARGV[1])
  end
end
return 0
`)

// quotaKey is the tenant's counter, the same key the async processor's
// gate counts on: <prefix><attribute>:<tenant>.
func (b *Broker) quotaKey(tenant string) string {
	return b.p.Quota.Prefix + b.p.Quota.Attribute + ":" + tenant
}

// classify takes a reserved slot for tenant when it has a limit and one is
// free. release, non-nil only when a slot was taken, gives it back. A Redis
// failure fails open: reserved, nothing to release.
func (b *Broker) classify(ctx context.Context, tenant string) (class quotaClass, release func()) {
	limit := b.p.Quota.Limits[tenant]
	if limit <= 0 {
		return classReserved, nil
	}
	key := b.quotaKey(tenant)
	// Not on ctx alone: a client cancelling mid-script would lose the
	// reply of a slot the server took (held until the window expires).
	actx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	got, err := acquireScript.Run(actx, b.rdb, []string{key}, limit, b.p.Quota.WindowSeconds).Int64()
	if err != nil {
		b.log.WarnContext(ctx, "async-broker: quota check failed, classifying reserved", "tenant", tenant, "error", err)
		return classReserved, nil
	}
	if got == 0 {
		return classOverflow, nil
	}
	return classReserved, func() {
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer stop()
		if err := releaseScript.Run(rctx, b.rdb, []string{key}, b.p.Quota.WindowSeconds).Err(); err != nil {
			b.log.WarnContext(rctx, "async-broker: quota release", "tenant", tenant, "error", err)
		}
	}
}
