package main

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i))
	}
	assert.Equal(t, time.Duration(500), percentile(d, 50))
	assert.Equal(t, time.Duration(990), percentile(d, 99))
	assert.Equal(t, time.Duration(1000), percentile(d, 100))
	assert.Equal(t, time.Duration(7), percentile([]time.Duration{7}, 99))
	assert.Zero(t, percentile(nil, 99))
}

func TestTallyMergesAndReports(t *testing.T) {
	t.Parallel()
	chat, stream := kindNamed(t, "rest-chat"), kindNamed(t, "rest-chat-stream")
	hang := faultNamed(t, "prefill=hang")
	a, b := newTally(), newTally()
	a.add(chat, nil, verdict{class: classOK}, observation{total: 10 * time.Millisecond})
	a.add(stream, nil, verdict{class: classOK}, observation{ttfb: 2 * time.Millisecond, total: 30 * time.Millisecond})
	a.add(chat, hang, verdict{class: classFault}, observation{total: 5 * time.Second})
	once := faultNamed(t, "prefill=status-once:503")
	a.add(chat, once, verdict{class: classOK}, observation{total: 10 * time.Millisecond})
	b.add(chat, once, unexpected("prefill=status-once:503: status 502 (want a retried success)"), observation{status: 502})
	b.add(chat, hang, unexpected("prefill=hang: status 502, want 504"), observation{status: 502, total: time.Second})
	b.add(chat, hang, unexpected("prefill=hang: status 502, want 504"), observation{status: 502})
	b.add(stream, nil, verdict{class: classDisconnect}, observation{})
	b.add(stream, nil, unexpected("transport error"), observation{transport: errors.New("connection reset by peer")})
	a.merge(b)
	a.elapsed = time.Second

	r := newReport(conditions{Duration: time.Second, Concurrency: 2}, a, newTally())
	assert.Equal(t, 9, r.Requests)
	assert.InDelta(t, 9.0, r.PerSecond, 1e-9)
	assert.Equal(t, map[string]int{"ok": 3, "expected-fault": 1, "disconnected": 1, "unexpected": 4}, r.Outcomes)
	assert.Equal(t, map[string]int{"ok": 2, "expected-fault": 1, "disconnected": 0, "unexpected": 3}, r.Kinds["rest-chat"])
	assert.Equal(t, faultCount{Want: "504 / DeadlineExceeded", Sent: 3, AsExpected: 1, Slowest: 5 * time.Second}, r.Faults["prefill=hang"])
	assert.Equal(t, faultCount{Want: "ok (retried)", Sent: 2, AsExpected: 1, Slowest: 10 * time.Millisecond}, r.Faults["prefill=status-once:503"])
	assert.Equal(t, causeCount{Count: 2, Example: "after 1s; status 502"}, r.Unexpected["rest-chat: prefill=hang: status 502, want 504"])
	assert.Equal(t, "after 0s; transport: connection reset by peer", r.Unexpected["rest-chat-stream: transport error"].Example)
	assert.Equal(t, 30*time.Millisecond, r.Latency.OKp99)
	assert.Equal(t, 30*time.Millisecond, r.Latency.OKMax)
	assert.Equal(t, 2*time.Millisecond, r.Latency.TTFBp99)
	assert.Equal(t, 5*time.Second, r.Latency.FaultMax)

	r.Start = resources{Goroutines: 13, RSS: 80 << 20}
	r.End = r.Start
	r.judge()
	assert.Equal(t, []string{"4 unexpected outcomes"}, r.Failures)
	var out strings.Builder
	r.write(&out)
	assert.Contains(t, out.String(), "requests 9 (9/s): ok 3, expected-fault 1, disconnected 1, unexpected 4")
	assert.Regexp(t, `prefill=status-once:503 +ok \(retried\) +2 +1 +10.0\n`, out.String())
	assert.Contains(t, out.String(), "rest-chat: prefill=hang: status 502, want 504: 2 (after 1s; status 502)")
	assert.Contains(t, out.String(), "FAIL:\n  4 unexpected outcomes")
}

func TestJudgeResources(t *testing.T) {
	t.Parallel()
	base := resources{Goroutines: 13, RSS: 80 << 20}
	tests := []struct {
		name     string
		end      resources
		warmup   bool // an unexpected outcome in the warm-up
		failures []string
	}{
		{name: "back to rest", end: resources{Goroutines: 23, RSS: 144 << 20}},
		{name: "goroutines left", end: resources{Goroutines: 24, RSS: 80 << 20},
			failures: []string{"goroutines did not come back to the baseline: 13 at the start, 24 at the end (slack 10)"}},
		{name: "RSS grown", end: resources{Goroutines: 13, RSS: 145 << 20},
			failures: []string{"RSS grew from 80.0 MiB to 145.0 MiB (bound 144.0 MiB)"}},
		{name: "warm-up failure counts", end: base, warmup: true, failures: []string{"1 unexpected outcomes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			soak, warm := newTally(), newTally()
			soak.add(kindNamed(t, "grpc-chat"), nil, verdict{class: classOK}, observation{})
			if tt.warmup {
				warm.add(kindNamed(t, "grpc-chat"), nil, unexpected("gRPC Internal"), observation{})
			}
			r := newReport(conditions{}, soak, warm)
			r.Start, r.End = base, tt.end
			r.judge()
			assert.Equal(t, tt.failures, r.Failures)
		})
	}
}

func TestJudgeWantsASuccess(t *testing.T) {
	t.Parallel()
	r := newReport(conditions{}, newTally(), newTally())
	r.judge()
	assert.Equal(t, []string{"no request succeeded"}, r.Failures)
}

func TestRSSBound(t *testing.T) {
	t.Parallel()
	assert.Equal(t, int64(100<<20+64<<20), rssBound(100<<20), "small: the fixed slack")
	assert.Equal(t, int64(300<<20), rssBound(200<<20), "large: half the baseline")
}

func TestPickFaultOnlyOnReachedLegs(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range kinds {
		seen := map[string]bool{}
		for range 2000 {
			f := pickFault(r, k.legs)
			require.NotZero(t, f.target&k.legs, "%s got %s", k.name, f.header)
			seen[f.header] = true
		}
		for _, f := range faults {
			assert.Equal(t, f.target&k.legs != 0, seen[f.header], "%s: %s drawn iff reachable", k.name, f.header)
		}
	}
}

func TestPickKindFollowsWeights(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	counts := map[string]int{}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	const draws = 20000
	for range draws {
		counts[pickKind(r).name]++
	}
	for _, k := range kinds {
		assert.InDelta(t, float64(k.weight)/float64(total), float64(counts[k.name])/draws, 0.02, k.name)
	}
}
