package main

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted,
// which must be in ascending order: the smallest value with at least p% of
// the samples at or below it. It is 0 for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// summary is what the report shows of one target in one cell.
type summary struct {
	Requests       int           `json:"requests"`
	PerSecond      float64       `json:"requests_per_second"`
	TTFBp50        time.Duration `json:"ttfb_p50_ns"`
	TTFBp99        time.Duration `json:"ttfb_p99_ns"`
	TotalP50       time.Duration `json:"total_p50_ns"`
	TotalP99       time.Duration `json:"total_p99_ns"`
	CPUPerReq      time.Duration `json:"cpu_per_request_ns"`
	SimPerReq      time.Duration `json:"sim_cpu_per_request_ns"`
	SelfPerReq     time.Duration `json:"client_cpu_per_request_ns"`
	SyscallsPerReq float64       `json:"hop_syscalls_per_request"`
	AddedP50       time.Duration `json:"added_ttfb_p50_ns"`
	AddedTotal     time.Duration `json:"added_total_p50_ns"`
}

// summarize computes r's summary; direct is the direct target's summary
// the added latencies are over (nil for the direct target itself).
func summarize(r *targetResult, direct *summary) summary {
	ttfb, total := slices.Clone(r.TTFB), slices.Clone(r.Total)
	slices.Sort(ttfb)
	slices.Sort(total)
	s := summary{
		Requests: len(ttfb),
		TTFBp50:  percentile(ttfb, 50),
		TTFBp99:  percentile(ttfb, 99),
		TotalP50: percentile(total, 50),
		TotalP99: percentile(total, 99),
	}
	if r.Elapsed > 0 {
		s.PerSecond = float64(s.Requests) / r.Elapsed.Seconds()
	}
	if s.Requests > 0 {
		s.CPUPerReq = r.CPU / time.Duration(s.Requests)
		s.SimPerReq = r.SimCPU / time.Duration(s.Requests)
		s.SelfPerReq = r.SelfCPU / time.Duration(s.Requests)
		s.SyscallsPerReq = float64(r.Syscalls) / float64(s.Requests)
	}
	if direct != nil {
		s.AddedP50 = s.TTFBp50 - direct.TTFBp50
		s.AddedTotal = s.TotalP50 - direct.TotalP50
	}
	return s
}

// ratio is a/b, and false when b is not positive (no meaningful ratio).
func ratio(a, b time.Duration) (float64, bool) {
	if b <= 0 {
		return 0, false
	}
	return float64(a) / float64(b), true
}
