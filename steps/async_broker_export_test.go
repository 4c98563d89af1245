package steps

import "time"

// Test hooks of the async-broker, compiled into this package's tests only.

// SetAsyncBrokerParked makes every wait call f when it found no result and
// is about to block.
func SetAsyncBrokerParked(b *AsyncBroker, f func()) { b.parked = f }

// SetAsyncBrokerPolls replaces the wait cadences (poll mode, and the
// backup poll under notifications).
func SetAsyncBrokerPolls(b *AsyncBroker, poll, backup time.Duration) {
	b.pollEvery, b.backupPollEvery = poll, backup
}

// AsyncBrokerNotifies reports whether waits wake up on keyspace
// notifications.
func AsyncBrokerNotifies(b *AsyncBroker) bool { return b.notifier != nil }

// AsyncBrokerRoute resolves a request's queue and tier.
func AsyncBrokerRoute(b *AsyncBroker, model, tenant string) (queue, tier string, matched bool) {
	return b.p.route(model, tenant)
}

// AsyncBrokerFirstUnrouted records an unrouted model for the log dedup.
func AsyncBrokerFirstUnrouted(b *AsyncBroker, model string) bool { return b.firstUnrouted(model) }

// MaxUnroutedModels is the dedup set's cap.
const MaxUnroutedModels = maxUnroutedModels
