package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// The idle-streams probe opens many streamed chats at once and holds them
// after their first event: the simulator waits an hour between tokens, so
// each stream stays open with nothing to send, as a long generation does
// between tokens. It reports what one such stream costs the process in
// front of the simulator, over the same process before the streams were
// opened: goroutines and heap in use (the coordinator's /metrics) and
// resident set (/proc/<pid>/status). The bare proxy is the reference for
// the resident set. Goals (issue 23): at most idleGoroutineGoal goroutines
// and idleRSSGoal bytes per stream, and less than idle10kGoal for 10,000
// streams (the process at rest and 10,000 times a stream).

// Goals of the idle-streams probe.
const (
	idleGoroutineGoal = 4
	idleRSSGoal       = 64 << 10
	idle10kGoal       = 700 << 20
)

// idleSample is one process's goroutines, heap and stacks in use and
// resident set.
type idleSample struct {
	Goroutines int64 `json:"goroutines"`
	HeapInuse  int64 `json:"heap_inuse_bytes"`
	StackInuse int64 `json:"stack_inuse_bytes"`
	RSS        int64 `json:"rss_bytes"`
}

// idleResult is what the idle-streams probe measured.
type idleResult struct {
	Streams   int        `json:"streams"`
	Base      idleSample `json:"coordinator_base"`
	Open      idleSample `json:"coordinator_open"`
	End       idleSample `json:"coordinator_after_close"`
	ProxyBase idleSample `json:"proxy_base"`
	ProxyOpen idleSample `json:"proxy_open"`
	Err       string     `json:"error,omitempty"`
}

// perStream is (open - base) / streams.
func perStream(open, base int64, streams int) float64 {
	if streams == 0 {
		return 0
	}
	return float64(open-base) / float64(streams)
}

// idleSimName names the idle-streams probe's simulator.
const idleSimName = "sim-idle"

// runIdleStreams runs the idle-streams probe sc with n streams.
func (l *loader) runIdleStreams(ctx context.Context, f *fleet, coordinatorBin, simBin, self string, sc scenario, n int, progress io.Writer) (*idleResult, error) {
	r := &idleResult{Streams: n}
	sim, err := f.StartSim(ctx, simBin, idleSimName, procs.SimOptions{TokenDelay: time.Hour})
	if err != nil {
		return r, err
	}
	coordinator, err := f.startCoordinator(ctx, coordinatorBin, "idle", sim, sc.pipeline)
	if err != nil {
		return r, err
	}
	defer coordinator.hop.Stop(5 * time.Second)
	proxy, err := f.startProxy(ctx, self, sim.Gateway)
	if err != nil {
		return r, err
	}
	defer proxy.hop.Stop(5 * time.Second)
	fmt.Fprintf(progress, "idle streams: %d through the coordinator...\n", n)
	if r.Base, r.Open, err = l.holdStreams(ctx, coordinator, sc, n, true); err != nil {
		return r, coordinator.failed(err)
	}
	if r.End, err = settleGoroutines(ctx, coordinator, r.Base.Goroutines+10, 10*time.Second); err != nil {
		return r, coordinator.failed(err)
	}
	fmt.Fprintf(progress, "idle streams: %d through the proxy...\n", n)
	if r.ProxyBase, r.ProxyOpen, err = l.holdStreams(ctx, proxy, sc, n, false); err != nil {
		return r, proxy.failed(err)
	}
	return r, nil
}

// holdStreams warms t up with a few streams, then samples it, opens n
// streams, waits for each one's first event, samples it again and closes
// them. withMetrics reads goroutines and heap from t's /metrics.
func (l *loader) holdStreams(ctx context.Context, t target, sc scenario, n int, withMetrics bool) (base, open idleSample, err error) {
	if err := openStreams(ctx, t.base+sc.path, sc.body, 8, func() error { return nil }); err != nil {
		return base, open, fmt.Errorf("warm-up: %w", err)
	}
	if err := sleepCtx(ctx, time.Second); err != nil {
		return base, open, err
	}
	if base, err = sample(ctx, t, withMetrics); err != nil {
		return base, open, err
	}
	err = openStreams(ctx, t.base+sc.path, sc.body, n, func() error {
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return err
		}
		open, err = sample(ctx, t, withMetrics)
		return err
	})
	return base, open, err
}

// openStreams opens n streams to url at once, each on its own connection,
// waits until each has had its first event, calls held, and closes them.
func openStreams(ctx context.Context, url string, body []byte, n int, held func() error) error {
	transport := &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableCompression: true,
		DisableKeepAlives:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	resps := make([]*http.Response, n)
	for i := range n {
		wg.Go(func() {
			resp, err := postStream(ctx, client, url, body, i)
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
				return
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	err := first
	if err == nil {
		err = held()
	}
	for _, resp := range resps {
		if resp != nil {
			resp.Body.Close()
		}
	}
	return err
}

// postStream opens one stream and reads it up to the end of its first
// event.
func postStream(ctx context.Context, client *http.Client, url string, body []byte, i int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "idle-stream-"+strconv.Itoa(i))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream %d: status %d", i, resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 512)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("stream %d: before its first event: %w", i, err)
		}
		if len(line) <= 2 && strings.TrimSpace(string(line)) == "" {
			return resp, nil
		}
	}
}

// sample reads t's hop: its resident set, and with withMetrics its
// goroutines and heap in use from /metrics.
func sample(ctx context.Context, t target, withMetrics bool) (idleSample, error) {
	var s idleSample
	rs, err := readResidentSet(t.hop.PID())
	if err != nil {
		return s, err
	}
	s.RSS = rs.RSS
	if !withMetrics {
		return s, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/metrics", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	err = parseGoMetrics(raw, &s)
	return s, err
}

// goMetrics are the Go runtime gauges sample reads, by exposition name.
var goMetrics = map[string]func(*idleSample) *int64{
	"go_goroutines":                 func(s *idleSample) *int64 { return &s.Goroutines },
	"go_memstats_heap_inuse_bytes":  func(s *idleSample) *int64 { return &s.HeapInuse },
	"go_memstats_stack_inuse_bytes": func(s *idleSample) *int64 { return &s.StackInuse },
}

// parseGoMetrics takes the goMetrics from a Prometheus text exposition
// into s.
func parseGoMetrics(raw []byte, s *idleSample) error {
	found := 0
	for line := range strings.Lines(string(raw)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		field, known := goMetrics[name]
		if !ok || !known {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*field(s) = int64(v)
		found++
	}
	if found != len(goMetrics) {
		return errors.New("metrics: want go_goroutines, go_memstats_heap_inuse_bytes and go_memstats_stack_inuse_bytes")
	}
	return nil
}

// settleGoroutines waits up to wait for t's goroutines to come down to at
// most want, and returns the last sample either way.
func settleGoroutines(ctx context.Context, t target, want int64, wait time.Duration) (idleSample, error) {
	deadline := time.Now().Add(wait)
	for {
		s, err := sample(ctx, t, true)
		if err != nil || s.Goroutines <= want || time.Now().After(deadline) {
			return s, err
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return s, err
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// writeIdle prints the idle-streams probe; nothing without one.
func writeIdle(w io.Writer, r *idleResult) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\n== idle streams: %d streamed chats held open after their first event (decode only, REST) ==\n", r.Streams)
	if r.Err != "" {
		fmt.Fprintf(w, "ABORTED: %s\n", r.Err)
		return
	}
	g := perStream(r.Open.Goroutines, r.Base.Goroutines, r.Streams)
	rss := perStream(r.Open.RSS, r.Base.RSS, r.Streams)
	heap := perStream(r.Open.HeapInuse, r.Base.HeapInuse, r.Streams)
	stack := perStream(r.Open.StackInuse, r.Base.StackInuse, r.Streams)
	proxyRSS := perStream(r.ProxyOpen.RSS, r.ProxyBase.RSS, r.Streams)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "per stream\tcoordinator\tgoal\tverdict\tproxy")
	fmt.Fprintf(tw, "goroutines\t%.2f\t<= %d\t%s\t-\n", g, idleGoroutineGoal, passFail(g <= idleGoroutineGoal))
	fmt.Fprintf(tw, "RSS KB\t%.1f\t<= %d\t%s\t%.1f\n", rss/1024, idleRSSGoal>>10, passFail(rss <= idleRSSGoal), proxyRSS/1024)
	at10k, proxy10k := float64(r.Base.RSS)+10000*rss, float64(r.ProxyBase.RSS)+10000*proxyRSS
	fmt.Fprintf(tw, "10k streams MB\t%.0f\t< %d\t%s\t%.0f\n", at10k/(1<<20), idle10kGoal>>20, passFail(at10k < idle10kGoal), proxy10k/(1<<20))
	fmt.Fprintf(tw, "heap in use KB\t%.1f\t-\t-\t-\n", heap/1024)
	fmt.Fprintf(tw, "stacks in use KB\t%.1f\t-\t-\t-\n", stack/1024)
	_ = tw.Flush()
	fmt.Fprintf(w, "coordinator goroutines: %d before, %d open, %d after closing them\n", r.Base.Goroutines, r.Open.Goroutines, r.End.Goroutines)
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
