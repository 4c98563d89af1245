package asyncbroker

import "time"

// Test hooks of the async-broker, compiled into this package's tests only.

// SetParked makes every wait call f when it found no result and is about
// to block.
func SetParked(b *Broker, f func()) { b.parked = f }

// SetPolls replaces the wait cadences (poll mode, and the backup poll
// under notifications).
func SetPolls(b *Broker, poll, backup time.Duration) {
	b.pollEvery, b.backupPollEvery = poll, backup
}

// SetStartupTimeout replaces Start's bound (5 s).
func SetStartupTimeout(b *Broker, d time.Duration) { b.startupTimeout = d }

// StartupTimeout is Start's bound.
const StartupTimeout = startupTimeout

// Notifies reports whether waits wake up on keyspace notifications.
func Notifies(b *Broker) bool { return b.notifier != nil }

// Route resolves a request's queue and tier.
func Route(b *Broker, model, tenant string) (queue, tier string, matched bool) {
	return b.p.route(model, tenant)
}

// FirstUnrouted records an unrouted model for the log dedup.
func FirstUnrouted(b *Broker, model string) bool { return b.firstUnrouted(model) }

// MaxUnroutedModels is the dedup set's cap.
const MaxUnroutedModels = maxUnroutedModels
