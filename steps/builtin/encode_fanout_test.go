package builtin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// fanOutContext is a chat request with n images, hashes h0..h<n-1>.
func fanOutContext(n int) *steps.RequestContext {
	rc := mmChatContext()
	rc.Multimodal = make([]features.MultimodalEntry, n)
	for i := range rc.Multimodal {
		rc.Multimodal[i] = features.MultimodalEntry{Index: i, Hash: fmt.Sprintf("h%d", i), Placeholder: features.Placeholder{Offset: 1, Length: 1}}
	}
	return rc
}

// TestEncodeFanOutIsBounded holds every leg in the fake until the test
// lets it go, one at a time and only once the fan-out has filled every
// slot again, and measures the most legs the fake ever held at once.
func TestEncodeFanOutIsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		params   map[string]any
		sentLegs int
		want     int
	}{
		{name: "max_parallel 3", params: map[string]any{"max_parallel": 3}, sentLegs: 7, want: 3},
		{name: "default 8", sentLegs: 12, want: 8},
		{name: "integral float", params: map[string]any{"max_parallel": 2.0}, sentLegs: 5, want: 2},
		{name: "one at a time", params: map[string]any{"max_parallel": 1}, sentLegs: 3, want: 1},
		{name: "fewer legs than slots", params: map[string]any{"max_parallel": 16}, sentLegs: 4, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inFlight, peak atomic.Int32
			arrived := make(chan struct{}, tt.sentLegs)
			release := make(chan struct{})
			gw := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				inFlight.Add(-1) // before answering, so the next leg never overlaps it
				_, _ = w.Write([]byte(encodeAnswer(legHash(bodyOf(r)))))
			})
			ctx, _ := cancellable(t)
			params := map[string]any{"use_openai_format": true}
			for k, v := range tt.params {
				params[k] = v
			}
			step := newEncode(t, gw.URL, params)
			rc := fanOutContext(tt.sentLegs)
			done := make(chan error, 1)
			go func() { done <- step.Execute(ctx, rc) }()

			for k := range tt.sentLegs {
				within(t, arrived, fmt.Sprintf("leg %d", k))
				if k+1 >= tt.want { // every slot busy: free one
					release <- struct{}{}
				}
			}
			for range tt.want - 1 {
				release <- struct{}{}
			}
			require.NoError(t, within(t, done, "Execute"))
			assert.Equal(t, int32(tt.want), peak.Load(), "most legs in flight at once")
			assert.Len(t, gw.Legs(), tt.sentLegs)
			require.Len(t, rc.ECDescriptors, tt.sentLegs)
			for i, d := range rc.ECDescriptors {
				assert.JSONEq(t, fmt.Sprintf(`{"h%d":%s}`, i, descriptor(fmt.Sprintf("h%d", i))), string(d))
			}
		})
	}
}

// TestEncodeFirstFailureCancelsTheOthers fails one leg once all the others
// are in flight and checks that the fake sees every other leg's request
// context end (the client gave up on them) and that no descriptor is kept.
func TestEncodeFirstFailureCancelsTheOthers(t *testing.T) {
	t.Parallel()
	const nLegs = 4
	othersIn := make(chan struct{}, nLegs)
	othersEnded := make(chan struct{}, nLegs)
	gw := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if legHash(bodyOf(r)) != "h2" {
			othersIn <- struct{}{}
			<-r.Context().Done()
			othersEnded <- struct{}{}
			return
		}
		for range nLegs - 1 {
			select {
			case <-othersIn:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ctx, _ := cancellable(t)
	rc := fanOutContext(nLegs)
	err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true, "max_parallel": nLegs}).Execute(ctx, rc)

	var se *gateway.StatusError
	require.ErrorAs(t, err, &se, "the first failure is the step's error")
	assert.Equal(t, "encode[2]", se.Leg)
	assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
	for k := range nLegs - 1 {
		within(t, othersEnded, fmt.Sprintf("cancellation of other leg %d", k))
	}
	assert.Nil(t, rc.ECDescriptors)
}

// TestEncodeFirstFailureStopsQueuedLegs: with one slot, a failing first
// leg means the queued nLegs are never sent.
func TestEncodeFirstFailureStopsQueuedLegs(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	rc := fanOutContext(5)
	err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true, "max_parallel": 1}).Execute(context.Background(), rc)
	var se *gateway.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "encode[0]", se.Leg)
	assert.Len(t, gw.Legs(), 1)
}

// TestEncodeClientCancellation cancels the request while every leg is in
// flight: Execute returns the cancellation once every leg has ended, and
// the fake sees every leg's context end. (TestMain's goleak check fails
// the package if any goroutine is left behind.)
func TestEncodeClientCancellation(t *testing.T) {
	t.Parallel()
	const nLegs = 3
	in := make(chan struct{}, nLegs)
	ended := make(chan struct{}, nLegs)
	gw := steptest.NewGateway(t, func(_ http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		<-r.Context().Done()
		ended <- struct{}{}
	})
	ctx, cancel := cancellable(t)
	step := newEncode(t, gw.URL, map[string]any{"use_openai_format": true, "max_parallel": 2})
	rc := fanOutContext(nLegs)
	done := make(chan error, 1)
	go func() { done <- step.Execute(ctx, rc) }()
	within(t, in, "leg 0")
	within(t, in, "leg 1")
	cancel()

	err := within(t, done, "Execute after cancellation")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
	within(t, ended, "leg 0 context")
	within(t, ended, "leg 1 context")
	assert.Len(t, gw.Legs(), 2, "the queued leg is never sent")
	assert.Nil(t, rc.ECDescriptors)
}

func TestEncodeCancelledBeforeStartSendsNothing(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rc := fanOutContext(3)
	err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(ctx, rc)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, gw.Legs())
	assert.Nil(t, rc.ECDescriptors)
}

// BenchmarkEncodeFanOut measures the per-request cost of eight chat legs
// against an immediate fake.
func BenchmarkEncodeFanOut(b *testing.B) {
	answer := []byte(`{"ec_transfer_params":{"h":{"peer_host":"10.0.0.1"}}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	client, err := gateway.New(gateway.Options{Address: srv.URL, MaxIdleConnsPerHost: 16})
	require.NoError(b, err)
	b.Cleanup(client.Close)
	step, err := builtin.NewEncodePlugin(client, phaseECSet(b)).New(map[string]any{"use_openai_format": true})
	require.NoError(b, err)
	rc := fanOutContext(8)
	b.ReportAllocs()
	for b.Loop() {
		if err := step.Execute(context.Background(), rc); err != nil {
			b.Fatal(err)
		}
	}
}
