package fleet_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/fleet"
)

func newMembership(t *testing.T, opts fleet.Options, sources ...fleet.Source) *fleet.Membership {
	t.Helper()
	m, err := fleet.New(opts, sources...)
	require.NoError(t, err)
	return m
}

func refresh(t *testing.T, m *fleet.Membership) fleet.Snapshot {
	t.Helper()
	s, err := m.Refresh(t.Context())
	require.NoError(t, err)
	return s
}

func TestStaticEpochs(t *testing.T) {
	t.Parallel()
	m := newMembership(t, fleet.Options{}, fleet.Static([]fleet.Worker{
		{Role: fleet.Prefill, Address: "10.0.1.1:8000"},
		{Role: fleet.Decode, Address: "10.0.0.1:8000"},
		{Role: fleet.Encode, Address: "10.0.2.1:8000"},
	}))

	assert.Equal(t, fleet.Snapshot{}, m.Current(), "empty at epoch 0 before the first refresh")
	want := fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{wA, wE, wC}}
	assert.Equal(t, want, refresh(t, m), "sorted by ID, IDs filled in")
	assert.Equal(t, want, refresh(t, m), "an unchanged set keeps its epoch")
	cur := m.Current()
	cur.Workers[0] = wB
	assert.Equal(t, want, m.Current(), "a snapshot is the caller's copy")
	assert.Equal(t, []fleet.Worker{wC}, want.Role(fleet.Prefill))

	require.NoError(t, m.Check(1))
	at, err := m.At(1)
	require.NoError(t, err)
	assert.Equal(t, want, at)
	_, err = m.At(0)
	assert.EqualError(t, err, "fleet: stale epoch 0 (current 1): added decode/10.0.0.1:8000, encode/10.0.2.1:8000, prefill/10.0.1.1:8000")
	var stale *fleet.StaleEpochError
	require.ErrorAs(t, m.Check(0), &stale)
	assert.Equal(t, fleet.StaleEpochError{Have: 0, Current: 1, Added: []fleet.Worker{wA, wE, wC}, Diff: true}, *stale)
	assert.EqualError(t, stale, "fleet: stale epoch 0 (current 1): added decode/10.0.0.1:8000, encode/10.0.2.1:8000, prefill/10.0.1.1:8000")
}

func TestCheckNamesWhatChanged(t *testing.T) {
	t.Parallel()
	src := newFake("fake", wA, wB)
	m := newMembership(t, fleet.Options{}, src)
	require.Equal(t, uint64(1), refresh(t, m).Epoch)
	src.set(wA, wC)
	require.Equal(t, uint64(2), refresh(t, m).Epoch)
	src.set(wC)
	require.Equal(t, uint64(3), refresh(t, m).Epoch)

	tests := []struct {
		name  string
		epoch uint64
		want  fleet.StaleEpochError
		msg   string
	}{
		{"two changes", 1, fleet.StaleEpochError{Have: 1, Current: 3, Added: []fleet.Worker{wC}, Removed: []fleet.Worker{wA, wB}, Diff: true},
			"fleet: stale epoch 1 (current 3): added prefill/10.0.1.1:8000; removed decode/10.0.0.1:8000, decode/10.0.0.2:8000"},
		{"one removal", 2, fleet.StaleEpochError{Have: 2, Current: 3, Removed: []fleet.Worker{wA}, Diff: true},
			"fleet: stale epoch 2 (current 3): removed decode/10.0.0.1:8000"},
		{"newer than the membership", 9, fleet.StaleEpochError{Have: 9, Current: 3},
			"fleet: unknown epoch 9 (current 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stale *fleet.StaleEpochError
			require.ErrorAs(t, m.Check(tt.epoch), &stale)
			assert.Equal(t, tt.want, *stale)
			assert.EqualError(t, stale, tt.msg)
		})
	}
}

func TestCheckPastHistory(t *testing.T) {
	t.Parallel()
	src := newFake("fake")
	m := newMembership(t, fleet.Options{History: 3}, src)
	for i, ws := range [][]fleet.Worker{{wA}, {wA, wB}, {wB}, {wB, wC}, {wC}} {
		src.set(ws...)
		require.Equal(t, uint64(i+1), refresh(t, m).Epoch)
	}

	var stale *fleet.StaleEpochError
	require.ErrorAs(t, m.Check(2), &stale)
	assert.Equal(t, fleet.StaleEpochError{Have: 2, Current: 5}, *stale, "epoch 2 is past the 3 snapshots kept")
	assert.EqualError(t, stale, "fleet: stale epoch 2 (current 5): membership changed 3 times since")

	require.ErrorAs(t, m.Check(3), &stale, "the oldest snapshot kept still diffs")
	assert.Equal(t, fleet.StaleEpochError{Have: 3, Current: 5, Added: []fleet.Worker{wC}, Removed: []fleet.Worker{wB}, Diff: true}, *stale)
}

func TestCheckWorkerLeftAndCameBack(t *testing.T) {
	t.Parallel()
	src := newFake("fake", wA)
	m := newMembership(t, fleet.Options{}, src)
	refresh(t, m)
	src.set(wA, wB)
	refresh(t, m)
	src.set(wA)
	require.Equal(t, uint64(3), refresh(t, m).Epoch, "a worker leaving is a change even when it came before")

	var stale *fleet.StaleEpochError
	require.ErrorAs(t, m.Check(1), &stale)
	assert.Equal(t, fleet.StaleEpochError{Have: 1, Current: 3, Diff: true}, *stale)
	assert.EqualError(t, stale, "fleet: stale epoch 1 (current 3): workers left and came back in 2 changes")
}

func TestStaleErrorListsAtMostEight(t *testing.T) {
	t.Parallel()
	var ws []fleet.Worker
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9", "10.0.1.0"} {
		ws = append(ws, fleet.NewWorker(fleet.Decode, a+":8000"))
	}
	err := &fleet.StaleEpochError{Have: 1, Current: 2, Added: ws, Diff: true}
	assert.Contains(t, err.Error(), "decode/10.0.0.8:8000 and 2 more")
	assert.NotContains(t, err.Error(), "10.0.0.9")
}

func TestFailingSourceKeepsLastGoodAnswer(t *testing.T) {
	t.Parallel()
	failing := newFake("dns decode flaky", wA)
	other := newFake("static", wC)
	m := newMembership(t, fleet.Options{}, failing, other)
	require.Equal(t, fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{wA, wC}}, refresh(t, m))

	boom := errors.New("server misbehaving")
	failing.fail(boom)
	other.set(wC, wE)
	s, err := m.Refresh(t.Context())
	require.ErrorIs(t, err, boom)
	assert.EqualError(t, err, "fleet: dns decode flaky: server misbehaving")
	assert.Equal(t, fleet.Snapshot{Epoch: 2, Workers: []fleet.Worker{wA, wE, wC}}, s,
		"the failing source keeps wA, the other's change applies")

	s, err = m.Refresh(t.Context())
	require.Error(t, err)
	assert.Equal(t, uint64(2), s.Epoch, "a failure alone changes nothing")
}

func TestInvalidAnswerIsAnError(t *testing.T) {
	t.Parallel()
	src := newFake("fake", wA)
	m := newMembership(t, fleet.Options{}, src)
	refresh(t, m)
	src.set(fleet.Worker{ID: "x", Role: fleet.Decode, Address: "10.0.0.9"})
	s, err := m.Refresh(t.Context())
	assert.ErrorContains(t, err, `fleet: fake: worker "10.0.0.9": address`)
	assert.Equal(t, fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{wA}}, s)
}

func TestSourceTimeout(t *testing.T) {
	t.Parallel()
	m := newMembership(t, fleet.Options{SourceTimeout: 50 * time.Millisecond}, &blockingSource{}, newFake("static", wA))
	s, err := m.Refresh(t.Context())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "fleet: blocking: ")
	assert.Equal(t, fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{wA}}, s, "the answering source is not held up")
}

func TestRefreshWaitsForTheRunningOne(t *testing.T) {
	t.Parallel()
	blocking := &blockingSource{entered: make(chan struct{})}
	m := newMembership(t, fleet.Options{SourceTimeout: time.Minute}, blocking)

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := m.Refresh(ctx)
		first <- err
	}()
	<-blocking.entered

	waiting, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop()
	s, err := m.Refresh(waiting)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the wait for the running refresh ends with the context")
	assert.EqualError(t, err, "fleet: refresh: context deadline exceeded")
	assert.Equal(t, fleet.Snapshot{}, s)

	_, err = m.Refresh(waiting)
	require.ErrorIs(t, err, context.DeadlineExceeded, "an ended context resolves nothing")

	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
}

func TestRun(t *testing.T) {
	t.Parallel()
	src := &countingSource{calls: make(chan struct{})}
	m := newMembership(t, fleet.Options{}, src)

	require.ErrorContains(t, m.Run(t.Context(), 0), "interval 0s must be positive")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, time.Millisecond) }()
	for range 3 {
		<-src.calls
	}
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, fleet.Snapshot{Epoch: 1, Workers: []fleet.Worker{wA}}, m.Current())
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	src := newFake("fake")
	m := newMembership(t, fleet.Options{History: 4}, src)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			if i%2 == 0 {
				src.set(wA)
			} else {
				src.set(wA, wB)
			}
			_, _ = m.Refresh(t.Context())
		}
	})
	for range 2 {
		wg.Go(func() {
			var last uint64
			for range 200 {
				s := m.Current()
				assert.GreaterOrEqual(t, s.Epoch, last, "epochs never go back")
				last = s.Epoch
				var stale *fleet.StaleEpochError
				if err := m.Check(s.Epoch); err != nil && assert.ErrorAs(t, err, &stale) {
					assert.Greater(t, stale.Current, s.Epoch, "only a newer membership makes a listing stale")
				}
				if at, err := m.At(s.Epoch); err == nil {
					assert.Equal(t, s, at, "At's snapshot is the one of its epoch")
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(200), m.Current().Epoch, "each refresh changed the set")
}

func TestAnEpochFromBeforeARestartIsStale(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := fleet.Static([]fleet.Worker{fleet.NewWorker(fleet.Decode, "127.0.0.1:8001")})
	before, err := fleet.New(fleet.Options{FirstEpoch: 100 << 16}, src)
	require.NoError(t, err)
	old, err := before.Refresh(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(100<<16+1), old.Epoch)

	after, err := fleet.New(fleet.Options{FirstEpoch: 101 << 16}, src) // the same fleet, a second later
	require.NoError(t, err)
	cur, err := after.Refresh(ctx)
	require.NoError(t, err)
	assert.Equal(t, old.Workers, cur.Workers)
	var stale *fleet.StaleEpochError
	require.ErrorAs(t, after.Check(old.Epoch), &stale)
	assert.Contains(t, stale.Error(), "is from before this coordinator started")
	assert.Less(t, fleet.FirstEpochNow(), uint64(1)<<53, "epochs stay exact in a JSON number")
}
