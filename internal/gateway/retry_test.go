package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// retryClock is a deterministic retry clock: jitter picks the longest wait
// and sleep records the wait instead of taking it.
type retryClock struct {
	mu     sync.Mutex
	sleeps []time.Duration
	// onSleep, if set, runs in sleep; its error is sleep's.
	onSleep func(ctx context.Context) error
}

func (c *retryClock) install(client *gateway.Client) {
	gateway.SetRetryClock(client, func(n int64) int64 { return n - 1 }, func(ctx context.Context, d time.Duration) error {
		c.mu.Lock()
		c.sleeps = append(c.sleeps, d)
		c.mu.Unlock()
		if c.onSleep != nil {
			return c.onSleep(ctx)
		}
		return nil
	})
}

func (c *retryClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// attempts records the attempts reported to the Observer.
type attempts struct {
	mu  sync.Mutex
	got []gateway.LegResult
}

func (a *attempts) LegDone(r gateway.LegResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r.Duration = 0
	a.got = append(a.got, r)
}

func (a *attempts) results() []gateway.LegResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]gateway.LegResult(nil), a.got...)
}

// scripted is a server that answers its n-th request (from 0) with
// script(n, w, r) and records each request's body.
type scripted struct {
	*httptest.Server
	n      atomic.Int32
	mu     sync.Mutex
	bodies []string
}

func startScripted(t *testing.T, script func(n int, w http.ResponseWriter, r *http.Request)) *scripted {
	t.Helper()
	s := &scripted{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		script(int(s.n.Add(1)-1), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// closeConn drops the connection before any answer: a reset before headers.
func closeConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

var policy = gateway.Retry{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 15 * time.Millisecond}

func retryClient(t *testing.T, address string, o gateway.Options) (*gateway.Client, *retryClock) {
	t.Helper()
	o.Address = address
	if o.Retry == (gateway.Retry{}) {
		o.Retry = policy
	}
	c, err := gateway.New(o)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	clock := &retryClock{}
	clock.install(c)
	return c, clock
}

func prefillLeg(retry bool) gateway.Request {
	return gateway.Request{Leg: "prefill", Path: "/v1/completions", Profile: gateway.ProfilePrefill, RequestID: "r",
		Body: []byte(`{"prompt":"hi"}`), Retry: retry}
}

// postLeg posts r with an Observer and reads a 2xx answer to its end.
func postLeg(c *gateway.Client, ctx context.Context, r gateway.Request) (string, []gateway.LegResult, error) {
	obs := &attempts{}
	resp, err := c.Post(gateway.WithObserver(ctx, obs), r)
	if err != nil {
		return "", obs.results(), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), obs.results(), err
}

func TestRetryOutcomes(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"ok":true}`) }
	tests := []struct {
		name   string
		script func(n int, w http.ResponseWriter, r *http.Request)
		retry  bool
		// statuses are the attempts' statuses as the Observer saw them.
		statuses []int
		// wantStatus is the error's status (0: a transport error); -1: success.
		wantStatus int
	}{
		{name: "503 then 200", retry: true, statuses: []int{503, 200}, wantStatus: -1, script: func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			ok(w)
		}},
		{name: "502 twice then 200", retry: true, statuses: []int{502, 502, 200}, wantStatus: -1, script: func(n int, w http.ResponseWriter, _ *http.Request) {
			if n < 2 {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			ok(w)
		}},
		{name: "reset before headers then 200", retry: true, statuses: []int{0, 200}, wantStatus: -1, script: func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 0 {
				closeConn(w)
				return
			}
			ok(w)
		}},
		{name: "503 until attempts run out", retry: true, statuses: []int{503, 503, 503}, wantStatus: 503, script: func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}},
		{name: "500 is not retried", retry: true, statuses: []int{500}, wantStatus: 500, script: func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}},
		{name: "429 is not retried", retry: true, statuses: []int{429}, wantStatus: 429, script: func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}},
		{name: "a leg without Retry is sent once", statuses: []int{503}, wantStatus: 503, script: func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}},
		{name: "a reset leg without Retry is sent once", statuses: []int{0}, wantStatus: 0, script: func(_ int, w http.ResponseWriter, _ *http.Request) {
			closeConn(w)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startScripted(t, tt.script)
			c, clock := retryClient(t, srv.URL, gateway.Options{})
			leg := prefillLeg(tt.retry)
			body, got, err := postLeg(c, context.Background(), leg)

			var statuses []int
			for i, r := range got {
				statuses = append(statuses, r.StatusCode)
				assert.Equal(t, i+1, r.Attempt)
				assert.Equal(t, "prefill", r.Phase)
			}
			assert.Equal(t, tt.statuses, statuses, "one report per attempt")
			assert.Len(t, srv.received(), len(tt.statuses))
			for _, b := range srv.received() {
				assert.Equal(t, string(leg.Body), b, "each attempt sends the whole body")
			}
			assert.Len(t, clock.waits(), len(tt.statuses)-1, "a wait between attempts")
			switch tt.wantStatus {
			case -1:
				require.NoError(t, err)
				assert.JSONEq(t, `{"ok":true}`, body)
			case 0:
				var te *gateway.TransportError
				require.ErrorAs(t, err, &te)
				assert.False(t, te.Timeout())
			default:
				var se *gateway.StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.wantStatus, se.StatusCode)
			}
		})
	}
}

func TestRetryRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, clock := retryClient(t, addr, gateway.Options{})
	_, got, err := postLeg(c, context.Background(), prefillLeg(true))
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.False(t, te.Timeout())
	assert.Len(t, got, 3, "a refused connection is tried MaxAttempts times")
	assert.Equal(t, []time.Duration{10 * time.Millisecond, 15 * time.Millisecond}, clock.waits())
}

// TestRetryHeaderTimeoutIsNotRetried: a leg that timed out waiting for its
// headers already spent the whole timeout.
func TestRetryHeaderTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := startScripted(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c, clock := retryClient(t, srv.URL, gateway.Options{ResponseHeaderTimeout: 50 * time.Millisecond})
	_, got, err := postLeg(c, context.Background(), prefillLeg(true))
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Timeout())
	assert.Len(t, got, 1)
	assert.Empty(t, clock.waits())
}

// TestRetryBackoff: each wait's cap doubles from InitialBackoff up to
// MaxBackoff, and the jitter draws in [0, cap].
func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	srv := startScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	c, clock := retryClient(t, srv.URL, gateway.Options{Retry: gateway.Retry{MaxAttempts: 6, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})
	_, got, err := postLeg(c, context.Background(), prefillLeg(true))
	require.Error(t, err)
	assert.Len(t, got, 6)
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 50 * ms, 50 * ms}, clock.waits(), "the longest draws: capped at MaxBackoff")

	var draws []int64
	var mu sync.Mutex
	gateway.SetRetryClock(c, func(n int64) int64 { mu.Lock(); draws = append(draws, n); mu.Unlock(); return 0 },
		func(context.Context, time.Duration) error { return nil })
	_, _, err = postLeg(c, context.Background(), prefillLeg(true))
	require.Error(t, err)
	assert.Equal(t, []int64{int64(10*ms) + 1, int64(20*ms) + 1, int64(40*ms) + 1, int64(50*ms) + 1, int64(50*ms) + 1}, draws,
		"full jitter: uniform in [0, cap]")
}

// TestRetryBoundedByDeadline: a wait that would end past ctx's deadline is
// not taken; a ctx that ends during a wait ends the leg with ctx's error.
func TestRetryBoundedByDeadline(t *testing.T) {
	t.Parallel()
	srv := startScripted(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })

	t.Run("no wait past the deadline", func(t *testing.T) {
		t.Parallel()
		c, clock := retryClient(t, srv.URL, gateway.Options{Retry: gateway.Retry{MaxAttempts: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		_, got, err := postLeg(c, ctx, prefillLeg(true))
		var se *gateway.StatusError
		require.ErrorAs(t, err, &se, "the last attempt's error")
		assert.Equal(t, 503, se.StatusCode)
		assert.Len(t, got, 1)
		assert.Empty(t, clock.waits())
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		t.Parallel()
		c, clock := retryClient(t, srv.URL, gateway.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		clock.onSleep = func(ctx context.Context) error { cancel(); return ctx.Err() }
		_, got, err := postLeg(c, ctx, prefillLeg(true))
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "prefill: ")
		assert.Len(t, got, 1)
	})
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	assert.NoError(t, gateway.Retry{}.Validate())
	assert.NoError(t, policy.Validate())
	assert.ErrorContains(t, gateway.Retry{MaxAttempts: -1}.Validate(), "max_attempts: must not be negative")
	assert.ErrorContains(t, gateway.Retry{InitialBackoff: -1}.Validate(), "initial_backoff: must not be negative")
	assert.ErrorContains(t, gateway.Retry{InitialBackoff: 2, MaxBackoff: 1}.Validate(), "max_backoff: must not be below initial_backoff")
}
