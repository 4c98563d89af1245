package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{name: "empty", sorted: nil, p: 50, want: 0},
		{name: "one sample p50", sorted: []time.Duration{7}, p: 50, want: 7},
		{name: "one sample p99", sorted: []time.Duration{7}, p: 99, want: 7},
		{name: "even count p50 is the lower middle", sorted: []time.Duration{1, 2, 3, 4}, p: 50, want: 2},
		{name: "odd count p50 is the middle", sorted: []time.Duration{1, 2, 3, 4, 5}, p: 50, want: 3},
		{name: "hundred p50", sorted: hundred, p: 50, want: 50},
		{name: "hundred p99", sorted: hundred, p: 99, want: 99},
		{name: "hundred p100", sorted: hundred, p: 100, want: 100},
		{name: "ten p99 is the max", sorted: hundred[:10], p: 99, want: 10},
		{name: "tiny p is the min", sorted: hundred, p: 0.001, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, percentile(tt.sorted, tt.p))
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	direct := &targetResult{
		TTFB:    []time.Duration{30, 10, 20},
		Total:   []time.Duration{40, 60, 50},
		Elapsed: time.Second,
		SimCPU:  300,
	}
	hop := &targetResult{
		TTFB:    []time.Duration{25, 35, 45, 15},
		Total:   []time.Duration{70, 80, 90, 100},
		Elapsed: 2 * time.Second,
		CPU:     400,
		SimCPU:  800,
	}
	d := summarize(direct, nil)
	assert.Equal(t, summary{
		Requests: 3, PerSecond: 3, TTFBp50: 20, TTFBp99: 30, TotalP50: 50, TotalP99: 60, SimPerReq: 100,
	}, d)
	assert.Equal(t, []time.Duration{30, 10, 20}, direct.TTFB, "samples keep their order")

	h := summarize(hop, &d)
	assert.Equal(t, summary{
		Requests: 4, PerSecond: 2, TTFBp50: 25, TTFBp99: 45, TotalP50: 80, TotalP99: 100,
		CPUPerReq: 100, SimPerReq: 200, AddedP50: 5, AddedTotal: 30,
	}, h)
}

func TestRatio(t *testing.T) {
	t.Parallel()
	r, ok := ratio(3, 2)
	require.True(t, ok)
	assert.InDelta(t, 1.5, r, 1e-9)
	_, ok = ratio(3, 0)
	assert.False(t, ok, "no ratio over zero")
	_, ok = ratio(3, -1)
	assert.False(t, ok, "no ratio over a negative added latency")
}
