package membudget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNilBudgetLimitsNothing(t *testing.T) {
	b := New(0, time.Second)
	require.Nil(t, b)
	a := b.Open()
	require.NoError(t, a.Take(context.Background(), 1<<40))
	assert.Zero(t, a.Held())
	a.Give(5)
	a.Close()
	assert.Nil(t, FromContext(WithAccount(context.Background(), a)))
}

func TestTakeAndGive(t *testing.T) {
	b := New(100, 0)
	a, c := b.Open(), b.Open()
	require.NoError(t, a.Take(context.Background(), 60))
	require.NoError(t, c.Take(context.Background(), 40))
	assert.EqualValues(t, 100, b.InUse())

	err := c.Take(context.Background(), 1)
	var ex *ExhaustedError
	require.ErrorAs(t, err, &ex)
	assert.ErrorIs(t, err, ErrExhausted)
	assert.False(t, ex.Never)
	assert.Equal(t, ExhaustedError{Want: 1, Held: 40, InUse: 100, Limit: 100}, *ex)
	assert.EqualValues(t, 1, b.Refused())

	a.Give(10)
	assert.EqualValues(t, 50, a.Held())
	require.NoError(t, c.Take(context.Background(), 10))
	a.Give(1000) // never more than it holds
	assert.Zero(t, a.Held())
	assert.EqualValues(t, 50, b.InUse())
	c.Close()
	c.Close()
	assert.Zero(t, b.InUse())
	assert.EqualValues(t, 100, b.Peak())
}

func TestMoreThanTheWholeBudgetIsRefusedAtOnce(t *testing.T) {
	b := New(100, time.Hour)
	a := b.Open()
	require.NoError(t, a.Take(context.Background(), 30))
	start := time.Now()
	err := a.Take(context.Background(), 71)
	var ex *ExhaustedError
	require.ErrorAs(t, err, &ex)
	assert.True(t, ex.Never)
	assert.Less(t, time.Since(start), time.Minute, "no wait for what can never fit")
	assert.Contains(t, err.Error(), "more than the whole budget")
	assert.EqualValues(t, 1, b.RefusedNever())
	assert.EqualValues(t, 1, b.Refused())
}

func TestWaiterGetsFreedBytes(t *testing.T) {
	b := New(100, time.Hour)
	holder, waiter := b.Open(), b.Open()
	require.NoError(t, holder.Take(context.Background(), 100))
	done := make(chan error, 1)
	go func() { done <- waiter.Take(context.Background(), 50) }()
	select {
	case err := <-done:
		t.Fatalf("took %v before any byte came back", err)
	case <-time.After(20 * time.Millisecond):
	}
	holder.Close()
	require.NoError(t, <-done)
	assert.EqualValues(t, 50, b.InUse())
}

func TestWaitEndsWithTheBudgetsWait(t *testing.T) {
	b := New(10, 10*time.Millisecond)
	require.NoError(t, b.Open().Take(context.Background(), 10))
	err := b.Open().Take(context.Background(), 5)
	require.ErrorIs(t, err, ErrExhausted)
	assert.EqualValues(t, 10, b.InUse())
}

func TestWaitEndsWithTheRequest(t *testing.T) {
	b := New(10, time.Hour)
	require.NoError(t, b.Open().Take(context.Background(), 10))
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("client went away")
	done := make(chan error, 1)
	go func() { done <- b.Open().Take(ctx, 5) }()
	cancel(cause)
	assert.ErrorIs(t, <-done, cause)
	assert.EqualValues(t, 10, b.InUse())
}

func TestNeverOverTheLimit(t *testing.T) {
	const limit = 1000
	b := New(limit, time.Millisecond)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			a := b.Open()
			defer a.Close()
			for j := range 200 {
				if a.Take(context.Background(), int64(1+(i+j)%97)) == nil && j%3 == 0 {
					a.Give(int64(1 + (i+j)%97))
				}
				if j%50 == 49 {
					a.Close()
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, b.InUse())
	assert.LessOrEqual(t, b.Peak(), int64(limit))
	assert.Positive(t, b.Peak())
}

func TestAccountOnTheContext(t *testing.T) {
	a := New(10, 0).Open()
	ctx := WithAccount(context.Background(), a)
	assert.Same(t, a, FromContext(ctx))
	assert.Nil(t, FromContext(context.Background()))
}

func TestDefaultLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fmt.Errorf("open %s: no such file", name)
		}
	}
	const gib = 1 << 30
	meminfo := "MemTotal:       25165824 kB\nMemFree: 1 kB\n" // 24 GiB
	tests := []struct {
		name    string
		goLimit int64
		files   map[string]string
		want    int64
	}{
		{"the chart: GOMEMLIMIT 1800MiB under a 2 GiB cgroup", 1800 << 20,
			map[string]string{"/sys/fs/cgroup/memory.max": "2147483648\n", "/proc/meminfo": meminfo}, 900 << 20},
		{"cgroup v2 only", 1<<63 - 1,
			map[string]string{"/sys/fs/cgroup/memory.max": "4294967296\n", "/proc/meminfo": meminfo}, 2 * gib},
		{"cgroup v2 without a limit", 1<<63 - 1,
			map[string]string{"/sys/fs/cgroup/memory.max": "max\n", "/proc/meminfo": meminfo}, 12 * gib},
		{"cgroup v1 without a limit", 1<<63 - 1,
			map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n", "/proc/meminfo": meminfo}, 12 * gib},
		{"nothing readable", 1<<63 - 1, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, defaultLimit(tt.goLimit, files(tt.files)))
		})
	}
}

// A request that ended draws nothing more: its account was closed, and
// what it took now would never come back.
func TestTakeAfterTheRequestEnded(t *testing.T) {
	b := New(100, time.Hour)
	a := b.Open()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.Take(ctx, 10), context.Canceled)
	assert.Zero(t, b.InUse())
}
