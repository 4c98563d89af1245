package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Retry is the policy of the legs that are safe to send again
// (Request.Retry): capped exponential backoff with full jitter.
//
// A leg is sent again only when its attempt got no answer because the
// connection failed before one came (refused, reset or closed before the
// headers) or when it was answered 502 or 503. A timeout is never retried:
// a connect or response-header timeout has already spent its whole budget,
// and the worker may still be working on the first attempt. A 2xx answer
// whose body breaks off is not retried either (the caller is reading it).
// The wait before attempt k+1 is uniform in [0, min(MaxBackoff,
// InitialBackoff·2^(k-1))]; a wait that would end past ctx's deadline is
// not taken: the leg fails with the last attempt's error.
type Retry struct {
	// MaxAttempts counts the first try; 0 or 1 sends every leg once.
	MaxAttempts int `param:"max_attempts"`
	// InitialBackoff caps the first wait; each next cap doubles.
	InitialBackoff time.Duration `param:"initial_backoff"`
	// MaxBackoff caps every wait.
	MaxBackoff time.Duration `param:"max_backoff"`
}

// DefaultRetry is the policy of the gateway legs and render unless
// configured: three attempts, waits capped at 50ms, 100ms, then 1s.
var DefaultRetry = Retry{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}

// Validate checks the policy; errors name the key.
func (p Retry) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("max_attempts: must not be negative, got %d", p.MaxAttempts)
	case p.InitialBackoff < 0:
		return fmt.Errorf("initial_backoff: must not be negative, got %s", p.InitialBackoff)
	case p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("max_backoff: must not be below initial_backoff (%s), got %s", p.InitialBackoff, p.MaxBackoff)
	}
	return nil
}

// backoffCap is the longest wait after attempt (1-based).
func (p Retry) backoffCap(attempt int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// send posts r, then again while the policy allows it. It returns the last
// attempt's outcome and the number of attempts made.
func (c *Client) send(ctx context.Context, r *Request, phase string, span trace.Span) (*http.Response, int, error) {
	attempts := 1
	if r.Retry {
		attempts = max(c.retry.MaxAttempts, 1)
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		resp, err := c.post(ctx, r, span)
		report(ctx, r.Leg, phase, attempt, start, resp, err)
		if attempt >= attempts || !retryable(err) {
			return resp, attempt, err
		}
		if err := c.backOff(ctx, r.Leg, span, attempt, err); err != nil {
			return nil, attempt, err
		}
	}
}

// backOff waits before the attempt after attempt, which failed with err.
// It returns the error to give up with instead: err when no time is left
// for another attempt, ctx's cause when ctx ends first.
func (c *Client) backOff(ctx context.Context, leg string, span trace.Span, attempt int, err error) error {
	wait := time.Duration(0)
	if limit := c.retry.backoffCap(attempt); limit > 0 {
		wait = time.Duration(c.jitter(int64(limit) + 1))
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
		return err
	}
	if span.IsRecording() {
		span.AddEvent("retry", trace.WithAttributes(attribute.Int("coordinator.attempt", attempt),
			attribute.String("error", err.Error()), attribute.Int64("coordinator.backoff_ms", wait.Milliseconds())))
	}
	if c.sleep(ctx, wait) != nil {
		return fmt.Errorf("%s: %w", leg, context.Cause(ctx))
	}
	return nil
}

// retryable reports whether a Post error may be cured by sending the leg
// again: a 502 or 503 answer, or a connection that failed before any answer
// came, without timing out.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode == http.StatusBadGateway || se.StatusCode == http.StatusServiceUnavailable
	}
	var te *TransportError
	if !errors.As(err, &te) || te.InBody || te.Timeout() {
		return false
	}
	for _, cause := range [...]error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(te.Err, cause) {
			return true
		}
	}
	// A keep-alive connection the server closed as the leg went out;
	// net/http's error for it is not exported.
	return strings.Contains(te.Err.Error(), "server closed idle connection")
}

// sleepCtx waits d or until ctx ends, and then returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
