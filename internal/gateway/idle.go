package gateway

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// ErrStreamIdle is the cause of a leg cut by Options.StreamIdleTimeout: its
// answer's body sent nothing for that long. It is a timeout (a net.Error
// whose Timeout is true), so a *TransportError wrapping it reports Timeout.
var ErrStreamIdle error = streamIdleError{}

type streamIdleError struct{}

func (streamIdleError) Error() string   { return "no data from the answer within stream_idle_timeout" }
func (streamIdleError) Timeout() bool   { return true }
func (streamIdleError) Temporary() bool { return true }

// errAttemptTimeout is the cause of an attempt cut by Options.Timeout: a
// timeout (a net.Error whose Timeout is true), so a *TransportError
// wrapping it reports Timeout.
var errAttemptTimeout error = attemptTimeoutError{}

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string   { return "no answer within the call's timeout" }
func (attemptTimeoutError) Timeout() bool   { return true }
func (attemptTimeoutError) Temporary() bool { return true }

// answerBody is a 2xx answer's body as Post returns it. Its Read errors are
// classified: the caller's own cancellation comes back as it came (ctx's
// error), anything else that is not io.EOF as a *TransportError with
// InBody set (a reset, a truncated body, a silent one).
//
// With an idle bound, each Read that waits that long for data closes the
// body, which ends the Read, and fails with ErrStreamIdle. The clock runs
// only while a Read waits: a caller slow to read again (a slow client
// downstream) is not the worker's silence.
type answerBody struct {
	io.ReadCloser
	ctx    context.Context // the caller's
	leg    string
	idle   time.Duration
	cancel context.CancelFunc // ends the leg's request at Close; nil if it has no context of its own
	timer  *time.Timer
	fired  atomic.Bool
}

func newAnswerBody(ctx context.Context, rc io.ReadCloser, leg string, idle time.Duration, cancel context.CancelFunc) *answerBody {
	b := &answerBody{ReadCloser: rc, ctx: ctx, leg: leg, idle: idle, cancel: cancel}
	if idle > 0 {
		b.timer = time.AfterFunc(idle, b.expire)
		b.timer.Stop()
	}
	return b
}

// expire cuts the leg: closing the body ends the Read waiting on it.
func (b *answerBody) expire() {
	b.fired.Store(true)
	_ = b.ReadCloser.Close()
}

// Read implements io.Reader.
func (b *answerBody) Read(p []byte) (int, error) {
	if b.timer != nil {
		b.timer.Reset(b.idle)
	}
	n, err := b.ReadCloser.Read(p)
	if b.timer != nil {
		b.timer.Stop()
	}
	if err == nil || err == io.EOF { // io.EOF comes unwrapped (io.Reader)
		return n, err
	}
	return n, b.classify(err)
}

// classify turns a body Read error into what the caller gets.
func (b *answerBody) classify(err error) error {
	switch {
	case b.fired.Load():
		return &TransportError{Leg: b.leg, Err: ErrStreamIdle, InBody: true}
	case b.ctx.Err() != nil:
		return err // the caller's cancellation, as it came
	}
	var te *TransportError
	if errors.As(err, &te) {
		return err
	}
	return &TransportError{Leg: b.leg, Err: err, InBody: true}
}

// Close implements io.Closer; it also releases the leg's request.
func (b *answerBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	if b.cancel != nil {
		b.cancel()
	}
	return err
}
