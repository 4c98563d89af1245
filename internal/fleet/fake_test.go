package fleet_test

import (
	"context"
	"slices"
	"sync"

	"github.com/coordinator-project/coordinator/internal/fleet"
)

// fakeSource answers what the test last set: workers, or an error.
type fakeSource struct {
	name string

	mu      sync.Mutex
	workers []fleet.Worker
	err     error
}

func newFake(name string, workers ...fleet.Worker) *fakeSource {
	return &fakeSource{name: name, workers: workers}
}

func (f *fakeSource) set(workers ...fleet.Worker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers, f.err = workers, nil
}

func (f *fakeSource) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSource) Resolve(context.Context) ([]fleet.Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.workers), nil
}

func (f *fakeSource) Validate() error { return nil }
func (f *fakeSource) String() string  { return f.name }

// blockingSource blocks each Resolve until its context ends, after saying
// on entered (when not nil) that it was called.
type blockingSource struct {
	entered chan struct{}
}

func (b *blockingSource) Resolve(ctx context.Context) ([]fleet.Worker, error) {
	if b.entered != nil {
		b.entered <- struct{}{}
	}
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

func (b *blockingSource) Validate() error { return nil }
func (b *blockingSource) String() string  { return "blocking" }

// countingSource answers one worker and says on calls each time it is
// called, without blocking when nobody listens.
type countingSource struct {
	calls chan struct{}
}

func (c *countingSource) Resolve(context.Context) ([]fleet.Worker, error) {
	select {
	case c.calls <- struct{}{}:
	default:
	}
	return []fleet.Worker{fleet.NewWorker(fleet.Decode, "10.0.0.1:8000")}, nil
}

func (c *countingSource) Validate() error { return nil }
func (c *countingSource) String() string  { return "counting" }

// Workers used across the tests.
var (
	wA = fleet.NewWorker(fleet.Decode, "10.0.0.1:8000")
	wB = fleet.NewWorker(fleet.Decode, "10.0.0.2:8000")
	wC = fleet.NewWorker(fleet.Prefill, "10.0.1.1:8000")
	wE = fleet.NewWorker(fleet.Encode, "10.0.2.1:8000")
)
