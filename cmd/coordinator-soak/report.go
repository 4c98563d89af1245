package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"
)

// Bounds of the resource check (see the package doc for their grounds).
const (
	// goroutineSlack is how far above the baseline the coordinator's
	// goroutines may end.
	goroutineSlack = 10
	// rssSlack and rssGrowth bound the end RSS: baseline plus the larger
	// of rssSlack and rssGrowth times the baseline.
	rssSlack  = 64 << 20
	rssGrowth = 0.5
)

// report is what a soak run found; its JSON form is what -json writes.
type report struct {
	Conditions conditions `json:"conditions"`
	Requests   int        `json:"requests"`
	PerSecond  float64    `json:"requests_per_second"`
	// Outcomes counts the requests by class.
	Outcomes map[string]int `json:"outcomes"`
	// Kinds counts each kind's requests by class.
	Kinds map[string]map[string]int `json:"kinds"`
	// Faults counts each injected fault and the right errors for it.
	Faults map[string]faultCount `json:"faults"`
	// Unexpected counts the unexpected outcomes by kind and cause.
	Unexpected map[string]causeCount `json:"unexpected"`
	// WarmupRequests and WarmupUnexpected are the warm-up's, which the
	// rest of the report leaves out.
	WarmupRequests   int                   `json:"warmup_requests"`
	WarmupUnexpected map[string]causeCount `json:"warmup_unexpected"`
	Latency          latency               `json:"latency"`
	// Start is the coordinator at rest after the warm-up, Peak the highest
	// of each value under load, End at rest after the load.
	Start resources `json:"start"`
	Peak  resources `json:"peak"`
	End   resources `json:"end"`
	// Failures is why the run failed; empty when it passed.
	Failures []string `json:"failures"`
}

// conditions are the run's settings.
type conditions struct {
	Duration        time.Duration `json:"duration_ns"`
	Warmup          time.Duration `json:"warmup_ns"`
	Concurrency     int           `json:"concurrency"`
	FaultShare      float64       `json:"fault_share"`
	DisconnectShare float64       `json:"disconnect_share"`
	TokenDelay      time.Duration `json:"sim_token_delay_ns"`
	GatewayTimeout  time.Duration `json:"gateway_timeout_ns"`
	CPUs            int           `json:"cpus"`
}

// latency is over the measured requests: ok ones (TTFB: ok streams), and
// those answered with their fault's error.
type latency struct {
	OKp50    time.Duration `json:"ok_p50_ns"`
	OKp99    time.Duration `json:"ok_p99_ns"`
	OKMax    time.Duration `json:"ok_max_ns"`
	TTFBp50  time.Duration `json:"stream_ttfb_p50_ns"`
	TTFBp99  time.Duration `json:"stream_ttfb_p99_ns"`
	FaultP99 time.Duration `json:"fault_p99_ns"`
	FaultMax time.Duration `json:"fault_max_ns"`
}

// newReport summarizes the soak's tally and the warm-up's.
func newReport(c conditions, soak, warmup *tally) *report {
	r := &report{
		Conditions:       c,
		Requests:         soak.requests(),
		Outcomes:         map[string]int{},
		Kinds:            map[string]map[string]int{},
		Faults:           map[string]faultCount{},
		Unexpected:       map[string]causeCount{},
		WarmupRequests:   warmup.requests(),
		WarmupUnexpected: map[string]causeCount{},
	}
	if soak.elapsed > 0 {
		r.PerSecond = float64(r.Requests) / soak.elapsed.Seconds()
	}
	for c, n := range soak.classes() {
		r.Outcomes[class(c).String()] = n
	}
	for name, counts := range soak.byKind {
		r.Kinds[name] = map[string]int{}
		for c, n := range counts {
			r.Kinds[name][class(c).String()] = n
		}
	}
	for name, fc := range soak.byFault {
		r.Faults[name] = *fc
	}
	for key, cc := range soak.unexpected {
		r.Unexpected[key] = *cc
	}
	for key, cc := range warmup.unexpected {
		r.WarmupUnexpected[key] = *cc
	}
	ok, ttfb, fault := sorted(soak.okTotal), sorted(soak.okTTFB), sorted(soak.faultTotal)
	r.Latency = latency{
		OKp50: percentile(ok, 50), OKp99: percentile(ok, 99), OKMax: percentile(ok, 100),
		TTFBp50: percentile(ttfb, 50), TTFBp99: percentile(ttfb, 99),
		FaultP99: percentile(fault, 99), FaultMax: percentile(fault, 100),
	}
	return r
}

func sorted(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}

// percentile is the nearest-rank p-th percentile of ascending samples; 0
// for none.
func percentile(asc []time.Duration, p float64) time.Duration {
	if len(asc) == 0 {
		return 0
	}
	hundredths := int(p * 100)
	rank := (len(asc)*hundredths + 9999) / 10000 // ceil(n * p / 100)
	return asc[max(0, min(rank, len(asc))-1)]
}

// rssBound is the most RSS the coordinator may end with after starting
// from start.
func rssBound(start int64) int64 {
	return start + max(rssSlack, int64(rssGrowth*float64(start)))
}

// judge fills in r.Failures: any unexpected outcome, no success at all,
// goroutines not back to the baseline, RSS grown past its bound.
func (r *report) judge() {
	r.Failures = nil
	if n := total(r.Unexpected) + total(r.WarmupUnexpected); n > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d unexpected outcomes", n))
	}
	if r.Outcomes[classOK.String()] == 0 {
		r.Failures = append(r.Failures, "no request succeeded")
	}
	if r.End.Goroutines > r.Start.Goroutines+goroutineSlack {
		r.Failures = append(r.Failures, fmt.Sprintf("goroutines did not come back to the baseline: %d at the start, %d at the end (slack %d)",
			r.Start.Goroutines, r.End.Goroutines, goroutineSlack))
	}
	if bound := rssBound(r.Start.RSS); r.End.RSS > bound {
		r.Failures = append(r.Failures, fmt.Sprintf("RSS grew from %s to %s (bound %s)", mib(r.Start.RSS), mib(r.End.RSS), mib(bound)))
	}
}

func total(causes map[string]causeCount) int {
	n := 0
	for _, c := range causes {
		n += c.Count
	}
	return n
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// write prints the report as compact tables.
func (r *report) write(w io.Writer) {
	c := r.Conditions
	fmt.Fprintf(w, "\n== soak: %v at %d concurrent (after %v warm-up), %.0f%% faulted, %.0f%% disconnecting, %d CPUs ==\n",
		c.Duration, c.Concurrency, c.Warmup, 100*c.FaultShare, 100*c.DisconnectShare, c.CPUs)
	fmt.Fprintf(w, "requests %d (%.0f/s): ok %d, expected-fault %d, disconnected %d, unexpected %d\n",
		r.Requests, r.PerSecond, r.Outcomes["ok"], r.Outcomes["expected-fault"], r.Outcomes["disconnected"], r.Outcomes["unexpected"])
	l := r.Latency
	fmt.Fprintf(w, "latency ms: ok p50 %s p99 %s max %s; stream TTFB p50 %s p99 %s; expected-fault p99 %s max %s\n",
		ms(l.OKp50), ms(l.OKp99), ms(l.OKMax), ms(l.TTFBp50), ms(l.TTFBp99), ms(l.FaultP99), ms(l.FaultMax))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nkind\tok\texpected-fault\tdisconnected\tunexpected\t")
	for _, name := range slices.Sorted(maps.Keys(r.Kinds)) {
		k := r.Kinds[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", name, k["ok"], k["expected-fault"], k["disconnected"], k["unexpected"])
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nfault\twant (REST / gRPC)\tsent\tas expected\tslowest ms")
	for _, name := range slices.Sorted(maps.Keys(r.Faults)) {
		f := r.Faults[name]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", name, f.Want, f.Sent, f.AsExpected, ms(f.Slowest))
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\ncoordinator\tstart\tpeak\tend\t")
	fmt.Fprintf(tw, "goroutines\t%d\t%d\t%d\t\n", r.Start.Goroutines, r.Peak.Goroutines, r.End.Goroutines)
	fmt.Fprintf(tw, "RSS\t%s\t%s\t%s\t\n", mib(r.Start.RSS), mib(r.Peak.RSS), mib(r.End.RSS))
	fmt.Fprintf(tw, "heap in use\t%s\t%s\t%s\t\n", mib(r.Start.HeapInuse), mib(r.Peak.HeapInuse), mib(r.End.HeapInuse))
	_ = tw.Flush()

	writeCauses(w, "unexpected outcomes (kind: cause, count, first example)", r.Unexpected)
	writeCauses(w, "unexpected outcomes during the warm-up", r.WarmupUnexpected)
	if len(r.Failures) == 0 {
		fmt.Fprintf(w, "\nPASS: no unexpected outcome, goroutines back to %d+%d, RSS within %s\n",
			r.Start.Goroutines, goroutineSlack, mib(rssBound(r.Start.RSS)))
		return
	}
	fmt.Fprintln(w, "\nFAIL:")
	for _, f := range r.Failures {
		fmt.Fprintln(w, "  "+f)
	}
}

func writeCauses(w io.Writer, title string, causes map[string]causeCount) {
	if len(causes) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, key := range slices.Sorted(maps.Keys(causes)) {
		c := causes[key]
		fmt.Fprintf(w, "  %s: %d (%s)\n", key, c.Count, c.Example)
	}
}

// writeJSON writes the report to path.
func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
