package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/service/config"
)

// outcomes records a hold's outcomes.
type outcomes struct {
	mu  sync.Mutex
	got []string
}

func (o *outcomes) add(s string) { o.mu.Lock(); o.got = append(o.got, s); o.mu.Unlock() }
func (o *outcomes) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got...)
}

func newTestHold(maxWait time.Duration, maxRequests int) (*Hold, *outcomes) {
	cfg := config.Default()
	cfg.Control.Hold = config.Hold{MaxWait: maxWait, MaxRequests: maxRequests}
	var o outcomes
	return NewHold(cfg, o.add), &o
}

func TestHoldOpenCostsNothingAndClosedWaitsForOpen(t *testing.T) {
	t.Parallel()
	h, o := newTestHold(time.Minute, 10)
	require.NoError(t, h.Wait(t.Context(), nil), "open: no wait")
	assert.Empty(t, o.list(), "an open hold counts nothing")

	h.Close()
	done := make(chan error, 3)
	for range 3 {
		go func() { done <- h.Wait(context.Background(), nil) }()
	}
	require.Eventually(t, func() bool { return h.Waiting() == 3 }, 10*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a held request went through before the open: %v", err)
	default:
	}
	assert.Equal(t, 3, h.Open())
	for range 3 {
		require.NoError(t, <-done)
	}
	assert.Equal(t, []string{HoldServed, HoldServed, HoldServed}, o.list())
	assert.False(t, h.Closed())
	assert.Equal(t, 0, h.Open(), "opening an open hold releases nothing")
}

func TestHoldBounds(t *testing.T) {
	t.Parallel()
	h, o := newTestHold(50*time.Millisecond, 1)
	h.Close()
	err := h.Wait(t.Context(), nil)
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), "control.hold.max_wait (50ms)")
	require.Len(t, st.Details(), 1)
	assert.IsType(t, &errdetails.RetryInfo{}, st.Details()[0], "REST Retry-After comes from it")

	h2, o2 := newTestHold(time.Minute, 1)
	h2.Close()
	first := make(chan error, 1)
	go func() { first <- h2.Wait(context.Background(), nil) }()
	require.Eventually(t, func() bool { return h2.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	err = h2.Wait(t.Context(), nil)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "control.hold.max_requests (1)")
	h2.Open()
	require.NoError(t, <-first)
	assert.Equal(t, []string{HoldTimedOut}, o.list())
	assert.Equal(t, []string{HoldFull, HoldServed}, o2.list())
}

func TestHoldEndsWithTheClientAndTheDrain(t *testing.T) {
	t.Parallel()
	h, o := newTestHold(time.Minute, 10)
	h.Close()
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() { gone <- h.Wait(ctx, nil) }()
	require.Eventually(t, func() bool { return h.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	assert.Equal(t, codes.Canceled, status.Code(<-gone))
	assert.Equal(t, 0, h.Waiting(), "a client that left is no longer counted")

	refusal := errors.New("server shutting down")
	drained := make(chan error, 1)
	go func() { drained <- h.Wait(context.Background(), refusal) }()
	require.Eventually(t, func() bool { return h.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	h.shutDown()
	assert.ErrorIs(t, <-drained, refusal)
	assert.ErrorIs(t, h.Wait(context.Background(), refusal), refusal, "after the drain began, at once")
	assert.Equal(t, []string{HoldGone, HoldGone, HoldGone}, o.list())
}

func TestAdmissionWaitsAtTheHold(t *testing.T) {
	t.Parallel()
	a, _ := newTestAdmission(0, 0, time.Second)
	a.Hold().Close()
	admitted := make(chan struct{})
	go func() {
		_, release, err := a.AdmitContext(context.Background(), true)
		if err == nil {
			release()
		}
		close(admitted)
	}()
	require.Eventually(t, func() bool { return a.Hold().Waiting() == 1 }, 10*time.Second, time.Millisecond)
	n, _ := a.InFlight()
	assert.Equal(t, 0, n, "a held call is not in flight yet")
	a.Hold().Open()
	<-admitted
}
