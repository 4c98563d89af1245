package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// resources is what the soak watches of the coordinator process, from its
// /metrics (the Prometheus process and Go collectors).
type resources struct {
	Goroutines int   `json:"goroutines"`       // go_goroutines
	RSS        int64 `json:"rss_bytes"`        // process_resident_memory_bytes
	HeapInuse  int64 `json:"heap_inuse_bytes"` // go_memstats_heap_inuse_bytes
}

// The metric names parseMetrics reads.
const (
	metricGoroutines = "go_goroutines"
	metricRSS        = "process_resident_memory_bytes"
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
)

// parseMetrics reads the watched gauges from a Prometheus text exposition.
func parseMetrics(r io.Reader) (resources, error) {
	var res resources
	found := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || (name != metricGoroutines && name != metricRSS && name != metricHeapInuse) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return res, fmt.Errorf("metrics: %s: %w", name, err)
		}
		switch name {
		case metricGoroutines:
			res.Goroutines = int(v)
		case metricRSS:
			res.RSS = int64(v)
		case metricHeapInuse:
			res.HeapInuse = int64(v)
		}
		found[name] = true
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("metrics: %w", err)
	}
	if len(found) != 3 {
		return res, fmt.Errorf("metrics: want %s, %s and %s", metricGoroutines, metricRSS, metricHeapInuse)
	}
	return res, nil
}

// scraper reads the coordinator's /metrics on a connection of its own per
// scrape, so no idle connection of the soak's holds a goroutine there.
type scraper struct {
	url    string
	client *http.Client
}

func newScraper(base string) *scraper {
	return &scraper{
		url:    base + "/metrics",
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

func (s *scraper) scrape(ctx context.Context) (resources, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return resources{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return resources{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resources{}, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// watch scrapes every interval until stop is called, keeping the peak of
// each value; stop returns it. A failed scrape is skipped.
func (s *scraper) watch(ctx context.Context, every time.Duration) (stop func() resources) {
	ctx, cancel := context.WithCancel(ctx)
	var peak resources
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if r, err := s.scrape(ctx); err == nil {
				peak = peakOf(peak, r)
			}
		}
	})
	return func() resources {
		cancel()
		wg.Wait()
		return peak
	}
}

// peakOf is the larger of each value.
func peakOf(a, b resources) resources {
	return resources{Goroutines: max(a.Goroutines, b.Goroutines), RSS: max(a.RSS, b.RSS), HeapInuse: max(a.HeapInuse, b.HeapInuse)}
}

// pollEvery is how often settling scrapes.
const pollEvery = 250 * time.Millisecond

// errUnsettled is a settle that ran out of time.
var errUnsettled = errors.New("not settled")

// settle scrapes every pollEvery until done says the samples so far are
// settled, or timeout passes (errUnsettled, with the last sample). It
// returns the sample done accepted.
func (s *scraper) settle(ctx context.Context, timeout time.Duration, done func(history []resources) bool) (resources, error) {
	deadline := time.Now().Add(timeout)
	var history []resources
	for {
		r, err := s.scrape(ctx)
		if err != nil {
			return r, err
		}
		history = append(history, r)
		if done(history) {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, errUnsettled
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// steadyFor is how many consecutive equal goroutine counts make a steady
// baseline: a second's worth of samples.
const steadyFor = int(time.Second / pollEvery)

// steady is a settle condition: the goroutine count has not changed over
// the last steadyFor samples.
func steady(history []resources) bool {
	if len(history) < steadyFor {
		return false
	}
	last := history[len(history)-steadyFor:]
	for _, r := range last {
		if r.Goroutines != last[0].Goroutines {
			return false
		}
	}
	return true
}

// backTo is a settle condition: goroutines steady at most at limit.
func backTo(limit int) func([]resources) bool {
	return func(history []resources) bool {
		return history[len(history)-1].Goroutines <= limit && steady(history)
	}
}
