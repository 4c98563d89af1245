package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultSourceTimeout bounds each source's answer within a refresh.
	DefaultSourceTimeout = 5 * time.Second
	// DefaultHistory is how many snapshots Check can diff against.
	DefaultHistory = 32
)

// Options tune a Membership. The zero value takes the defaults.
type Options struct {
	// SourceTimeout bounds each source's Resolve within a refresh (within
	// the refresh's own context); 0 is DefaultSourceTimeout.
	SourceTimeout time.Duration
	// History is how many recent snapshots, the current one included, are
	// kept for Check's diff; 0 is DefaultHistory.
	History int
	// Log receives Run's refresh errors and every membership change; nil
	// discards.
	Log *slog.Logger
	// FirstEpoch is the epoch of the empty membership before the first
	// refresh. A process that starts it above every epoch its previous
	// incarnation reached (from the clock: FirstEpochNow) tells an epoch
	// listed before a restart from a current one.
	FirstEpoch uint64
}

// FirstEpochNow is a FirstEpoch that grows with the clock: the Unix
// seconds now, shifted left 16 bits, so a restart a second later starts
// above a predecessor that changed fewer than 65536 times a second (and the
// epochs stay below 2^53, exact in a JSON number).
func FirstEpochNow() uint64 { return uint64(time.Now().Unix()) << 16 }

// Membership is the current set of workers across its sources, with an
// epoch that is bumped each time the set changes. Before the first refresh
// that finds a worker it is empty at Options.FirstEpoch.
//
// A Membership is safe for concurrent use. Refreshes run one at a time: a
// Refresh called during another waits for it (bounded by its context), so
// its answer was resolved after it was called.
type Membership struct {
	sources []Source
	timeout time.Duration
	log     *slog.Logger

	// refreshing is a one-slot semaphore held by the running refresh; it
	// guards last.
	refreshing chan struct{}
	// last is each source's last good answer, by index in sources.
	last [][]Worker

	mu sync.RWMutex
	// history holds the recent snapshots, oldest first, the current one
	// last; their epochs are consecutive.
	history    []Snapshot
	maxHistory int
	// first is Options.FirstEpoch.
	first uint64
}

// New is the membership of the workers of sources. It validates the
// options and every source and resolves nothing: call Refresh or Run.
func New(opts Options, sources ...Source) (*Membership, error) {
	if len(sources) == 0 {
		return nil, errors.New("fleet: no sources")
	}
	if opts.SourceTimeout < 0 || opts.History < 0 {
		return nil, fmt.Errorf("fleet: negative option (source timeout %v, history %d)", opts.SourceTimeout, opts.History)
	}
	for _, s := range sources {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	m := &Membership{
		sources:    slices.Clone(sources),
		timeout:    orDefault(opts.SourceTimeout, DefaultSourceTimeout),
		log:        opts.Log,
		refreshing: make(chan struct{}, 1),
		last:       make([][]Worker, len(sources)),
		history:    []Snapshot{{Epoch: opts.FirstEpoch}},
		maxHistory: orDefault(opts.History, DefaultHistory),
		first:      opts.FirstEpoch,
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Current returns the current snapshot.
func (m *Membership) Current() Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.history[len(m.history)-1].clone()
}

// Refresh asks every source now, concurrently, each within the source
// timeout and all within ctx, and returns the resulting snapshot. The epoch
// is bumped only when the set of workers changed. A source that fails
// keeps its last good answer (none before its first); the error joins the
// failures, each naming its source, and the snapshot is still the current
// one.
func (m *Membership) Refresh(ctx context.Context) (Snapshot, error) {
	if err := context.Cause(ctx); err != nil {
		return m.Current(), fmt.Errorf("fleet: refresh: %w", err)
	}
	select {
	case m.refreshing <- struct{}{}:
	case <-ctx.Done():
		return m.Current(), fmt.Errorf("fleet: refresh: %w", context.Cause(ctx))
	}
	defer func() { <-m.refreshing }()

	errs := m.resolveAll(ctx)
	var workers []Worker
	for _, ws := range m.last {
		workers = append(workers, ws...)
	}
	return m.apply(normalize(workers)), errors.Join(errs...)
}

// resolveAll resolves every source concurrently and stores each good
// answer in last; it returns the failures. The caller holds refreshing.
func (m *Membership) resolveAll(ctx context.Context) []error {
	answers := make([][]Worker, len(m.sources))
	errs := make([]error, len(m.sources))
	var wg sync.WaitGroup
	for i, s := range m.sources {
		wg.Go(func() { answers[i], errs[i] = m.resolve(ctx, s) })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			m.last[i] = answers[i]
		}
	}
	return errs
}

// resolve asks one source within the source timeout and checks its answer.
func (m *Membership) resolve(ctx context.Context, s Source) ([]Worker, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	workers, err := s.Resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", s, err)
	}
	for _, w := range workers {
		if err := w.validate(); err != nil {
			return nil, fmt.Errorf("fleet: %s: %w", s, err)
		}
	}
	return workers, nil
}

// apply makes workers (normalized) the current set, bumping the epoch when
// it differs from the current one, and returns the current snapshot.
func (m *Membership) apply(workers []Worker) Snapshot {
	m.mu.Lock()
	cur := m.history[len(m.history)-1]
	if slices.Equal(cur.Workers, workers) {
		m.mu.Unlock()
		return cur.clone()
	}
	next := Snapshot{Epoch: cur.Epoch + 1, Workers: workers}
	if len(m.history) == m.maxHistory {
		m.history = slices.Delete(m.history, 0, 1)
	}
	m.history = append(m.history, next)
	m.mu.Unlock()

	added, removed := diff(cur.Workers, next.Workers)
	m.log.Info("fleet: membership changed", "epoch", next.Epoch, "workers", len(next.Workers),
		"added", ids(added, maxListed), "removed", ids(removed, maxListed))
	return next.clone()
}

// Run refreshes the membership now and then every interval until ctx
// ends, logging failed refreshes; it returns nil then, having started no
// goroutine that outlives it. It fails at once on an interval that is not
// positive.
func (m *Membership) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("fleet: run: interval %v must be positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("fleet: refresh", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
