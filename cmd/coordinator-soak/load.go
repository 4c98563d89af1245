package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// runner sends the mix: each worker keeps one request in flight, drawing
// for each its kind, then a fault (faultShare of the requests) or a
// deliberate disconnect (disconnectShare), from its own seeded generator.
type runner struct {
	rest            *restClient
	grpc            *grpcClient
	faultShare      float64
	disconnectShare float64
	// timeout is the client's deadline per request: reaching it is a hang.
	timeout time.Duration
	seed    uint64
	// phase makes each run's draws its own (warm-up, soak).
	phase uint64
	// nonces numbers the requests over the whole soak, so no two share a
	// prompt.
	nonces atomic.Uint64
	// sent and bad count the requests and the unexpected outcomes of the
	// current run, for progress.
	sent, bad atomic.Int64
}

// maxDisconnectDelay bounds when a non-streamed request with a deliberate
// disconnect goes away: anywhere in its pipeline, or after its answer.
const maxDisconnectDelay = 50 * time.Millisecond

// run keeps conc workers sending until d has passed (each finishes the
// request it is in) or ctx ends, and returns what they saw.
func (r *runner) run(ctx context.Context, conc int, d time.Duration) *tally {
	r.phase++
	r.sent.Store(0)
	r.bad.Store(0)
	deadline := time.Now().Add(d)
	total := newTally()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			t := newTally()
			rng := rand.New(rand.NewPCG(r.seed, r.phase<<32|uint64(w)))
			var body []byte
			for ctx.Err() == nil && time.Now().Before(deadline) {
				body = r.one(ctx, rng, body, t)
			}
			mu.Lock()
			total.merge(t)
			mu.Unlock()
		})
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	return total
}

// one sends one request and adds its outcome to t; body is reused storage.
func (r *runner) one(ctx context.Context, rng *rand.Rand, body []byte, t *tally) []byte {
	k := pickKind(rng)
	var f *fault
	disconnect := false
	if x := rng.Float64(); x < r.faultShare {
		f = pickFault(rng, k.legs)
	} else if x < r.faultShare+r.disconnectShare {
		disconnect = true
	}
	nonce := r.nonces.Add(1)
	body = body[:0]
	if k.body != nil {
		body = k.body(body, nonce)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, r.timeout, errClientTimeout)
	defer stop()
	var leave func() // a disconnecting stream leaves after its first chunk
	if disconnect {
		if k.stream {
			leave = func() { cancel(errDisconnect) }
		} else {
			timer := time.AfterFunc(time.Duration(rng.Int64N(int64(maxDisconnectDelay))), func() { cancel(errDisconnect) })
			defer timer.Stop()
		}
	}
	var o observation
	if k.grpc {
		o = r.grpc.do(ctx, k, f, body, nonce, leave)
	} else {
		o = r.rest.do(ctx, k, f, body, leave)
	}
	v := classify(k, f, o)
	t.add(k, f, v, o)
	r.sent.Add(1)
	if v.class == classUnexpected {
		r.bad.Add(1)
	}
	return body
}

// progress prints the requests sent and the unexpected outcomes so far
// every interval until the returned stop is called.
func (r *runner) progress(w io.Writer, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "  %v: %d requests, %d unexpected\n",
					time.Since(start).Round(time.Second), r.sent.Load(), r.bad.Load())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
