package admission

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

func newTestAdmission(requests, streams int, shutdown time.Duration) (*Controller, *metrics.Metrics) {
	cfg := config.Default()
	cfg.Server.MaxConcurrentRequests = requests
	cfg.Server.MaxConcurrentStreams = streams
	cfg.Server.RetryAfter = 1500 * time.Millisecond
	cfg.Server.ShutdownTimeout = shutdown
	m := metrics.New()
	return New(cfg, counters(m), slog.New(slog.DiscardHandler)), m
}

// counters are the service's metrics, as the service gives them.
func counters(m *metrics.Metrics) Counters {
	return Counters{
		RejectedRequests:     m.Rejected(metrics.RejectedRequests),
		RejectedStreams:      m.Rejected(metrics.RejectedStreams),
		RejectedShuttingDown: m.Rejected(metrics.RejectedShuttingDown),
		ShutdownCut:          m.ShutdownCut,
	}
}

// requireRefused checks a refusal's code, its RetryInfo and the metric.
func requireRefused(t *testing.T, m *metrics.Metrics, err error, code codes.Code, reason string, count float64) {
	t.Helper()
	require.Error(t, err)
	st := status.Convert(err)
	assert.Equal(t, code, st.Code())
	d, ok := apierror.RetryDelay(st)
	assert.True(t, ok, "a refusal says when to retry")
	assert.Equal(t, 1500*time.Millisecond, d)
	var out dto.Metric
	require.NoError(t, m.Rejected(reason).Write(&out))
	assert.InDelta(t, count, out.GetCounter().GetValue(), 0, reason)
}

func TestAdmissionLimits(t *testing.T) {
	t.Parallel()
	a, m := newTestAdmission(3, 1, time.Second)

	stream, err := a.Admit(true)
	require.NoError(t, err)
	_, err = a.Admit(true)
	requireRefused(t, m, err, codes.ResourceExhausted, metrics.RejectedStreams, 1)
	assert.Contains(t, status.Convert(err).Message(), "server.max_concurrent_streams 1")

	r1, err := a.Admit(false)
	require.NoError(t, err)
	r2, err := a.Admit(false)
	require.NoError(t, err)
	requests, streams := a.InFlight()
	assert.Equal(t, 3, requests, "a stream is a request too")
	assert.Equal(t, 1, streams)
	_, err = a.Admit(false)
	requireRefused(t, m, err, codes.ResourceExhausted, metrics.RejectedRequests, 1)
	_, err = a.Admit(true)
	requireRefused(t, m, err, codes.ResourceExhausted, metrics.RejectedRequests, 2)
	assert.Contains(t, status.Convert(err).Message(), "server.max_concurrent_requests 3")

	stream()
	r1()
	r2()
	requests, streams = a.InFlight()
	assert.Zero(t, requests, "refusals leave nothing counted")
	assert.Zero(t, streams)
	_, err = a.Admit(true)
	require.NoError(t, err, "a released place is free again")
}

func TestAdmissionWithoutLimits(t *testing.T) {
	t.Parallel()
	a, _ := newTestAdmission(0, 0, time.Second)
	for range 10_000 {
		_, err := a.Admit(true)
		require.NoError(t, err)
	}
	requests, streams := a.InFlight()
	assert.Equal(t, 10_000, requests)
	assert.Equal(t, 10_000, streams)
}

// TestAdmissionNeverExceedsTheLimit: concurrent callers never hold more
// places than the limit.
func TestAdmissionNeverExceedsTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 8
	a, _ := newTestAdmission(limit, 0, time.Second)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 2000 {
				release, err := a.Admit(false)
				if err != nil {
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int64(limit))
	assert.Positive(t, peak.Load())
	requests, _ := a.InFlight()
	assert.Zero(t, requests)
}

func TestDrainWithNothingInFlight(t *testing.T) {
	t.Parallel()
	a, m := newTestAdmission(0, 0, time.Hour)
	start := time.Now()
	require.NoError(t, a.Drain(context.Background()))
	assert.Less(t, time.Since(start), time.Second)
	_, err := a.Admit(false)
	requireRefused(t, m, err, codes.Unavailable, metrics.RejectedShuttingDown, 1)
	assert.Equal(t, "server shutting down", status.Convert(err).Message())
}

// TestDrainWaitsForCallsThatEnd: the drain returns as soon as the last
// call in flight ends, before its timeout, and refuses calls meanwhile.
func TestDrainWaitsForCallsThatEnd(t *testing.T) {
	t.Parallel()
	a, m := newTestAdmission(0, 0, time.Hour)
	ctx, release, err := a.AdmitContext(context.Background(), true)
	require.NoError(t, err)
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(context.Background()) }()
	require.Eventually(t, a.draining.Load, time.Second, time.Millisecond)
	_, err = a.Admit(true)
	requireRefused(t, m, err, codes.Unavailable, metrics.RejectedShuttingDown, 1)
	select {
	case <-drained:
		t.Fatal("the drain ended with a call in flight")
	default:
	}
	release()
	select {
	case err := <-drained:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the drain did not end with the last call")
	}
	assert.NotErrorIs(t, context.Cause(ctx), ErrShuttingDown, "a call that ended in time was not cut short")
}

// TestDrainCancelsCallsLeftAfterTheTimeout: past shutdown_timeout the
// calls left have their context ended with ErrShuttingDown, and the drain
// returns once they ended.
func TestDrainCancelsCallsLeftAfterTheTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	a, _ := newTestAdmission(0, 0, timeout)
	ctx, release, err := a.AdmitContext(context.Background(), false)
	require.NoError(t, err)
	ended := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		<-ctx.Done()
		ended <- time.Since(start)
		release()
	}()
	require.NoError(t, a.Drain(context.Background()))
	took := <-ended
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+time.Second)
	assert.ErrorIs(t, context.Cause(ctx), ErrShuttingDown)
}

// TestDrainGivesUpOnCallsThatIgnoreCancellation: a call that does not end
// after its cancellation costs the stop StopGrace at most.
func TestDrainGivesUpOnCallsThatIgnoreCancellation(t *testing.T) {
	t.Parallel()
	a, _ := newTestAdmission(0, 0, 10*time.Millisecond)
	release, err := a.Admit(false)
	require.NoError(t, err)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = a.Drain(ctx)
	require.ErrorContains(t, err, "1 calls still in flight")
	assert.Less(t, time.Since(start), time.Second, "the stop context bounds the wait")
}

// TestCutShort: a call the drain cancelled ends UNAVAILABLE "server shutting
// down" whatever its handler returned; a client's own cancellation stays
// what it was.
func TestCutShort(t *testing.T) {
	t.Parallel()
	a, _ := newTestAdmission(0, 0, time.Millisecond)
	ctx, release, err := a.AdmitContext(context.Background(), false)
	require.NoError(t, err)
	go func() { <-ctx.Done(); release() }()
	require.NoError(t, a.Drain(context.Background()))
	err = a.cutShort(ctx, status.FromContextError(ctx.Err()).Err(), false)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, "server shutting down", status.Convert(err).Message())

	b, _ := newTestAdmission(0, 0, time.Hour)
	client, cancel := context.WithCancel(context.Background())
	ctx, release, err = b.AdmitContext(client, false)
	require.NoError(t, err)
	defer release()
	cancel()
	err = b.cutShort(ctx, status.FromContextError(ctx.Err()).Err(), false)
	assert.Equal(t, codes.Canceled, status.Code(err))
}

// BenchmarkAdmit is the hot path: admit and release one call, from every
// core at once.
func BenchmarkAdmit(b *testing.B) {
	a, _ := newTestAdmission(1<<30, 1<<30, time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			release, err := a.Admit(true)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}

// BenchmarkAdmitContext is what the interceptors pay: Admit plus a
// context the drain can end.
func BenchmarkAdmitContext(b *testing.B) {
	a, _ := newTestAdmission(1<<30, 1<<30, time.Second)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, release, err := a.AdmitContext(ctx, true)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}
