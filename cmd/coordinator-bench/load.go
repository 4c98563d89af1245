package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// target is one way to the simulated decode worker.
type target struct {
	name string
	base string         // base URL, e.g. http://127.0.0.1:8200
	hop  *procs.Process // the process between the bench and the simulator; nil for direct
	sim  *procs.Process // the simulator behind it
}

// failed wraps a failure on t with the end of the hop's and the
// simulator's output.
func (t target) failed(err error) error {
	err = fmt.Errorf("%s: %w", t.name, err)
	if t.hop != nil {
		err = fmt.Errorf("%w\n%s output:\n%s", err, t.hop.Name, t.hop.LogTail())
	}
	return err
}

// targetResult is one target's measured requests in one cell, merged over
// the rounds.
type targetResult struct {
	Target   string          `json:"target"`
	TTFB     []time.Duration `json:"ttfb_ns"`
	Total    []time.Duration `json:"total_ns"`
	Elapsed  time.Duration   `json:"elapsed_ns"`
	CPU      time.Duration   `json:"cpu_ns"`                   // the hop's CPU over the measured phases
	SimCPU   time.Duration   `json:"sim_cpu_ns"`               // the simulator's CPU over the same phases
	SelfCPU  time.Duration   `json:"client_cpu_ns"`            // the bench's own (load generator) CPU
	Syscalls int64           `json:"hop_syscalls"`             // the hop's read and write system calls
	RestRSS  int64           `json:"rest_rss_bytes,omitempty"` // the hop's VmRSS before its first measured phase (hop cells; restRSS)
	PeakRSS  int64           `json:"peak_rss_bytes,omitempty"` // the hop's VmHWM over its measured phases (hop cells; peakRSS)
	EndAnon  int64           `json:"end_anon_bytes,omitempty"` // the hop's RssAnon after its measured phases (peakRSS)
	EndFile  int64           `json:"end_file_bytes,omitempty"` // the hop's RssFile after its measured phases (peakRSS)
	RSSErr   string          `json:"rss_error,omitempty"`      // why RestRSS and PeakRSS were not measured
	Summary  summary         `json:"summary"`
}

// cell is one scenario at one concurrency, every target measured.
type cell struct {
	Scenario    string          `json:"scenario"`
	Concurrency int             `json:"concurrency"`
	Cascade     bool            `json:"cascade,omitempty"`
	Targets     []*targetResult `json:"targets"` // the baseline first: direct, or decode-only for a cascade
	Err         string          `json:"error,omitempty"`
}

// loader drives the targets. Workers share one keep-alive transport.
type loader struct {
	client      *http.Client
	warmup      time.Duration // per target per cell
	duration    time.Duration // measured, per target per cell, split over rounds
	rounds      int
	maxRequests int // measured, per target per cell, split over rounds
	// nonces numbers the requests of templated scenarios, over the whole
	// run and every target, so no two of them carry the same prompt.
	nonces atomic.Uint64
}

// newClient is an HTTP/1.1 keep-alive client keeping up to maxConns idle
// connections per target.
func newClient(maxConns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: maxConns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		Timeout: time.Minute,
	}
}

// runCell measures sc at conc concurrent requests on every target: a
// warm-up per target, then rounds of measured phases visiting the targets
// in turn, so noise on the machine lands on all of them alike. In a hop
// (not cascade) cell it also reads each hop's resident set at rest before
// its first measured phase and its peak after its last one. It stops at
// the first failed request.
func (l *loader) runCell(ctx context.Context, sc scenario, conc int, targets []target) (*cell, error) {
	c := &cell{Scenario: sc.name, Concurrency: conc, Cascade: sc.cascade}
	for _, t := range targets {
		c.Targets = append(c.Targets, &targetResult{Target: t.name})
	}
	for _, t := range targets {
		if _, err := l.phase(ctx, t, sc, conc, l.warmup, 0, false, 0); err != nil {
			return c, t.failed(fmt.Errorf("warm-up: %w", err))
		}
	}
	per := l.duration / time.Duration(l.rounds)
	for round := range l.rounds {
		limit := l.maxRequests / l.rounds
		if round < l.maxRequests%l.rounds {
			limit++
		}
		rate := 0.0 // requests per second the other targets are held to (sc.paced)
		for _, i := range visitOrder(sc, len(targets)) {
			r := c.Targets[i]
			if round == 0 && !sc.cascade {
				restRSS(targets[i], r)
			}
			before, elapsed := len(r.TTFB), r.Elapsed
			if err := l.measure(ctx, targets[i], sc, conc, per, limit, rate, r); err != nil {
				return c, targets[i].failed(err)
			}
			if round == l.rounds-1 && !sc.cascade {
				peakRSS(targets[i], r)
			}
			if sc.paced && rate == 0 {
				rate = float64(len(r.TTFB)-before) / (r.Elapsed - elapsed).Seconds()
			}
		}
	}
	direct := summarize(c.Targets[0], nil)
	c.Targets[0].Summary = direct
	for _, r := range c.Targets[1:] {
		r.Summary = summarize(r, &direct)
	}
	return c, nil
}

// visitOrder is the order a round visits n targets in: the table's, or
// for a paced scenario the coordinator (the last) first, so the others can
// be held to its request rate.
func visitOrder(sc scenario, n int) []int {
	order := make([]int, 0, n)
	if sc.paced {
		order = append(order, n-1)
	}
	for i := range n {
		if !sc.paced || i != n-1 {
			order = append(order, i)
		}
	}
	return order
}

// measure runs one measured phase on t (at most rate requests per second
// when rate > 0) and adds it, with the CPU the hop, the simulator and the
// bench itself used meanwhile, to into.
func (l *loader) measure(ctx context.Context, t target, sc scenario, conc int, d time.Duration, limit int, rate float64, into *targetResult) error {
	before, err := l.cpu(t)
	if err != nil {
		return err
	}
	ph, err := l.phase(ctx, t, sc, conc, d, limit, true, rate)
	if err != nil {
		return err
	}
	after, err := l.cpu(t)
	if err != nil {
		return err
	}
	into.TTFB = append(into.TTFB, ph.ttfb...)
	into.Total = append(into.Total, ph.total...)
	into.Elapsed += ph.elapsed
	into.CPU += after.hop - before.hop
	into.SimCPU += after.sim - before.sim
	into.SelfCPU += after.self - before.self
	into.Syscalls += after.hopSyscalls - before.hopSyscalls
	return nil
}

// usage is what the processes of one target have used so far.
type usage struct {
	hop, sim, self time.Duration // CPU
	hopSyscalls    int64         // the hop's read and write system calls
}

// cpu reads the usage of t's hop (none for direct), its simulator and the
// bench.
func (l *loader) cpu(t target) (usage, error) {
	var u usage
	var err error
	if t.hop != nil {
		if u.hop, err = processCPU(t.hop.PID()); err != nil {
			return u, err
		}
		if u.hopSyscalls, err = processSyscalls(t.hop.PID()); err != nil {
			return u, err
		}
	}
	if u.sim, err = processCPU(t.sim.PID()); err != nil {
		return u, err
	}
	u.self, err = processCPU(os.Getpid())
	return u, err
}

// phaseResult is what one phase measured.
type phaseResult struct {
	ttfb, total []time.Duration
	elapsed     time.Duration
}

// phase keeps conc requests in flight on t for d or until limit requests
// were sent (0: no limit), starting at most rate requests a second when
// rate > 0, recording the samples if record. The first failed request
// cancels the others; the error counts the failures.
func (l *loader) phase(ctx context.Context, t target, sc scenario, conc int, d time.Duration, limit int, record bool, rate float64) (phaseResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var pace <-chan time.Time // a tick per request; none unpaced
	if rate > 0 {
		ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer ticker.Stop()
		pace = ticker.C
	}
	url := t.base + sc.path
	var (
		sent, failed atomic.Int64
		wg           sync.WaitGroup
		mu           sync.Mutex
		res          phaseResult
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Go(func() {
			var ttfb, total []time.Duration
			buf := &bytes.Buffer{}
			br := bufio.NewReader(nil)
			var own []byte // this worker's body, for a templated scenario
			for n := 0; ctx.Err() == nil && time.Now().Before(deadline); n++ {
				if limit > 0 && sent.Add(1) > int64(limit) {
					break
				}
				if !paced(ctx, pace) {
					continue
				}
				var body []byte
				var stream bool
				body, own, stream = l.requestBody(sc, n, own)
				first, end, err := l.do(ctx, url, sc, body, stream, buf, br)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						cancel(err)
					}
					break
				}
				if record {
					ttfb, total = append(ttfb, first), append(total, end)
				}
			}
			mu.Lock()
			res.ttfb = append(res.ttfb, ttfb...)
			res.total = append(res.total, total...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	if err := context.Cause(ctx); err != nil {
		if n := failed.Load(); n > 0 {
			return res, fmt.Errorf("%d failed requests, first: %w", n, err)
		}
		return res, err
	}
	return res, nil
}

// paced waits for pace's next tick (at once when pace is nil); false when
// ctx ended first.
func paced(ctx context.Context, pace <-chan time.Time) bool {
	if pace == nil {
		return true
	}
	select {
	case <-pace:
		return true
	case <-ctx.Done():
		return false
	}
}

// requestBody is a worker's n-th request body and whether it streams; own
// is the worker's buffer for a templated scenario's body, returned for the
// next request.
func (l *loader) requestBody(sc scenario, n int, own []byte) (body, ownNext []byte, stream bool) {
	body, stream = sc.body, sc.stream
	if sc.mixed && n%2 == 1 {
		body, stream = sc.streamBody, true
	}
	if sc.template != nil {
		// The previous request is over, its answer read: the target read
		// its body before answering.
		own = sc.template.fill(own, l.nonces.Add(1))
		body = own
	}
	return body, own, stream
}

// do sends one request with body and checks the answer: status 200, and
// either a JSON body with choices or, when stream, sc.events server-sent
// events ending in data: [DONE] with nothing after it. It returns the time
// to the first response byte and to the end of the answer ([DONE] for a
// stream).
func (l *loader) do(ctx context.Context, url string, sc scenario, body []byte, stream bool, buf *bytes.Buffer, br *bufio.Reader) (ttfb, total time.Duration, err error) {
	var first time.Time
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if sc.cascade {
		req.Header.Set(simFaultHeader, conditionalTripwire)
	}
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(snippet))
	}
	var end time.Time
	if stream {
		br.Reset(resp.Body)
		events, done, err := countEvents(br)
		end = time.Now()
		if err != nil {
			return 0, 0, fmt.Errorf("read stream: %w", err)
		}
		if !done || events != sc.events {
			return 0, 0, fmt.Errorf("stream: %d events (ended by [DONE]: %t), want %d ending in [DONE]", events, done, sc.events)
		}
		if n, err := io.Copy(io.Discard, br); err != nil || n > 0 {
			return 0, 0, fmt.Errorf("stream: %d bytes after [DONE] (%v)", n, err)
		}
	} else {
		buf.Reset()
		_, err := buf.ReadFrom(resp.Body)
		end = time.Now()
		if err != nil {
			return 0, 0, fmt.Errorf("read body: %w", err)
		}
		if !json.Valid(buf.Bytes()) || !bytes.Contains(buf.Bytes(), []byte(`"choices"`)) {
			return 0, 0, errors.New("body: not a JSON completion")
		}
	}
	if first.IsZero() {
		return 0, 0, errors.New("no first-byte time")
	}
	return first.Sub(start), end.Sub(start), nil
}
