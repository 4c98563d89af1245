package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// maxAddedRatio is the target: the coordinator's added p50 time to first
// byte at most this many times the bare proxy's.
const maxAddedRatio = 1.5

// maxPeakRSSRatio is the goal of every hop cell: the coordinator's peak
// resident set during the cell at most this many times the bare proxy's.
const maxPeakRSSRatio = 1.5

func writeHeader(w io.Writer, o options, hop []scenario) {
	fmt.Fprintf(w, "coordinator-bench: %s %s/%s, %d CPUs, GOMAXPROCS %d, everything on 127.0.0.1\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if len(hop) > 0 {
		fmt.Fprintf(w, "simulator: --ttft 0 --token-delay 0 --strict=false; coordinator: decode-only pipeline, log_level 1\n")
		fmt.Fprintf(w, "per target per cell: %v warm-up, then up to %v / %d requests measured in %d rounds (direct, proxy, coordinator in turn)\n",
			o.warmup, o.duration, o.maxRequests, o.rounds)
	}
	fmt.Fprintf(w, "TTFB: request sent to first response byte; total: to the end of the body or data: [DONE]; all in µs\n")
	fmt.Fprintf(w, "CPU: utime+stime of each process from /proc/<pid>/stat (USER_HZ %d) over the measured phases, per request;\n", clockTicks)
	fmt.Fprintf(w, "  hop = the proxy or coordinator process, sim = the simulator, client = this load generator;\n")
	fmt.Fprintf(w, "  hop syscalls = its read and write system calls (syscr+syscw in /proc/<pid>/io) per request\n")
	fmt.Fprintf(w, "hop RSS: VmRSS of the hop before its first measured phase; hop peak RSS: its VmHWM over the measured phases (reset by clear_refs);\n")
	fmt.Fprintf(w, "  mapped files and anonymous: RssFile and RssAnon of the hop after its last measured phase\n")
}

// writeCell prints one scenario at one concurrency.
func writeCell(w io.Writer, c *cell) {
	fmt.Fprintf(w, "\n== %s, %d concurrent ==\n", c.Scenario, c.Concurrency)
	if scenarioPaced(c.Scenario) {
		fmt.Fprintf(w, "paced: each round measures the coordinator first and holds direct and proxy to its request rate\n")
	}
	if c.Err != "" {
		fmt.Fprintf(w, "ABORTED: %s\n", c.Err)
		return
	}
	if c.Cascade {
		writeCascadeCell(w, c)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trequests\treq/s\tTTFB p50\tTTFB p99\ttotal p50\tadded TTFB p50\tadded total p50\thop CPU/req\thop syscalls/req\tsim CPU/req\tclient CPU/req\thop RSS MB\thop peak RSS MB\t")
	for i, r := range c.Targets {
		s := r.Summary
		added, addedTotal, hop, syscalls, rest, peak := "-", "-", "-", "-", "-", "-"
		if i > 0 {
			added, addedTotal, hop = micros(s.AddedP50), micros(s.AddedTotal), micros(s.CPUPerReq)
			syscalls = fmt.Sprintf("%.1f", s.SyscallsPerReq)
		}
		if r.RestRSS > 0 && r.PeakRSS > 0 {
			rest, peak = mb(r.RestRSS), mb(r.PeakRSS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, s.Requests, s.PerSecond,
			micros(s.TTFBp50), micros(s.TTFBp99), micros(s.TotalP50),
			added, addedTotal, hop, syscalls, micros(s.SimPerReq), micros(s.SelfPerReq), rest, peak)
	}
	_ = tw.Flush()
	v := verdictOf(c)
	fmt.Fprintf(w, "coordinator added / proxy added, TTFB p50: %s (target <= %.1f) %s\n", v.ratio, maxAddedRatio, v.verdict)
	fmt.Fprintf(w, "coordinator added / proxy added, total p50: %s\n", v.totalRatio)
	fmt.Fprintf(w, "coordinator CPU / proxy CPU per request: %s%s\n", v.cpuRatio, cpuVerdict(c))
	rss, rssGoal := rssVerdict(c)
	fmt.Fprintf(w, "coordinator peak RSS / proxy peak RSS: %s %s\n", rss, rssGoal)
	if parts := rssParts(c); parts != "" {
		fmt.Fprintln(w, parts)
	}
	for _, r := range c.Targets {
		if r.RSSErr != "" {
			fmt.Fprintf(w, "%s RSS not measured: %s\n", r.Target, firstLine(r.RSSErr))
		}
	}
}

// rssVerdict compares a hop cell's coordinator peak RSS over the proxy's
// with maxPeakRSSRatio: the ratio ("-" when there is none) and the goal
// with its verdict.
func rssVerdict(c *cell) (ratio, verdict string) {
	goal := fmt.Sprintf("(goal <= %.1fx)", maxPeakRSSRatio)
	if c.Err != "" || len(c.Targets) < 3 {
		return "-", goal + " ABORTED"
	}
	proxy, coord := c.Targets[1], c.Targets[2]
	if proxy.RSSErr != "" || coord.RSSErr != "" || proxy.PeakRSS <= 0 || coord.PeakRSS <= 0 {
		return "-", goal + " not measured"
	}
	r := float64(coord.PeakRSS) / float64(proxy.PeakRSS)
	if r > maxPeakRSSRatio {
		return fmt.Sprintf("%.2fx", r), fmt.Sprintf("%s FAIL (%.2fx over)", goal, r/maxPeakRSSRatio)
	}
	return fmt.Sprintf("%.2fx", r), goal + " PASS"
}

// rssParts splits a hop cell's resident sets, read after the measured
// phases, into mapped files and anonymous memory, coordinator against
// proxy; "" when either was not read.
func rssParts(c *cell) string {
	if c.Err != "" || len(c.Targets) < 3 {
		return ""
	}
	proxy, coord := c.Targets[1], c.Targets[2]
	if proxy.EndAnon <= 0 || coord.EndAnon <= 0 {
		return ""
	}
	return fmt.Sprintf("  after the phases: mapped files (the binary, shared) coordinator %s MB, proxy %s MB; anonymous (its own) coordinator %s MB, proxy %s MB, %.2fx",
		mb(coord.EndFile), mb(proxy.EndFile), mb(coord.EndAnon), mb(proxy.EndAnon), float64(coord.EndAnon)/float64(proxy.EndAnon))
}

// cpuVerdict compares a cell's CPU ratio with its scenario's goal, if any.
func cpuVerdict(c *cell) string {
	goal := scenarioCPUGoal(c.Scenario)
	if goal == 0 || c.Err != "" || len(c.Targets) < 3 {
		return ""
	}
	r, ok := ratio(c.Targets[2].Summary.CPUPerReq, c.Targets[1].Summary.CPUPerReq)
	switch {
	case !ok:
		return fmt.Sprintf(" (goal <= %.1fx) n/a", goal)
	case r > goal:
		return fmt.Sprintf(" (goal <= %.1fx) FAIL (%.2fx over)", goal, r/goal)
	}
	return fmt.Sprintf(" (goal <= %.1fx) PASS", goal)
}

// scenarioPaced reports whether the named scenario is paced.
func scenarioPaced(name string) bool {
	i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
	return i >= 0 && scenarios[i].paced
}

// scenarioCPUGoal is the named scenario's CPU goal; 0 for none.
func scenarioCPUGoal(name string) float64 {
	i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
	if i < 0 {
		return 0
	}
	return scenarios[i].cpuGoal
}

// verdict is a cell's comparison of the coordinator with the proxy.
type verdict struct {
	ratio, totalRatio, cpuRatio, verdict string
}

func verdictOf(c *cell) verdict {
	if c.Err != "" || len(c.Targets) < 3 {
		return verdict{"-", "-", "-", "ABORTED"}
	}
	proxy, coord := c.Targets[1].Summary, c.Targets[2].Summary
	v := verdict{verdict: "n/a (proxy adds nothing measurable)"}
	if r, ok := ratio(coord.AddedP50, proxy.AddedP50); ok {
		v.ratio = fmt.Sprintf("%.2fx", r)
		v.verdict = "PASS"
		if r > maxAddedRatio {
			v.verdict = fmt.Sprintf("FAIL (%.2fx over)", r/maxAddedRatio)
		}
	} else {
		v.ratio = "-"
	}
	v.totalRatio, v.cpuRatio = "-", "-"
	if r, ok := ratio(coord.AddedTotal, proxy.AddedTotal); ok {
		v.totalRatio = fmt.Sprintf("%.2fx", r)
	}
	if r, ok := ratio(coord.CPUPerReq, proxy.CPUPerReq); ok {
		v.cpuRatio = fmt.Sprintf("%.2fx", r)
	}
	return v
}

// writeSummary prints one line per decode-only (hop) cell against the
// target; nothing when there are none.
func writeSummary(w io.Writer, cells []*cell) {
	cells = slices.DeleteFunc(slices.Clone(cells), func(c *cell) bool { return c.Cascade })
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== summary: coordinator vs bare proxy, added over direct (target: added TTFB p50 ratio <= %.1f) ==\n", maxAddedRatio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tconc\tdirect TTFB p50\tproxy added\tcoordinator added\tratio\tverdict\tproxy CPU/req\tcoordinator CPU/req\tCPU ratio\tCPU goal\tpeak RSS ratio\tRSS goal")
	for _, c := range cells {
		v := verdictOf(c)
		if c.Err != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t-\t-\n", c.Scenario, c.Concurrency, v.verdict)
			continue
		}
		direct, proxy, coord := c.Targets[0].Summary, c.Targets[1].Summary, c.Targets[2].Summary
		goal := strings.TrimSpace(cpuVerdict(c))
		if goal == "" {
			goal = "-"
		}
		rss, rssGoal := rssVerdict(c)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Scenario, c.Concurrency,
			micros(direct.TTFBp50), micros(proxy.AddedP50), micros(coord.AddedP50), v.ratio, v.verdict,
			micros(proxy.CPUPerReq), micros(coord.CPUPerReq), v.cpuRatio, goal, rss, rssGoal)
	}
	_ = tw.Flush()
}

// micros formats d in microseconds.
func micros(d time.Duration) string {
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond))
}

// writeJSON writes the options, the cascade preflights, every cell,
// samples included, and the probes to path.
func writeJSON(path string, o options, preflights []preflight, cells []*cell, probes probeResults) error {
	names := make([]string, len(o.scenarios))
	for i, s := range o.scenarios {
		names[i] = s.name
	}
	doc := struct {
		Go          string        `json:"go"`
		CPUs        int           `json:"cpus"`
		Duration    time.Duration `json:"duration_ns"`
		Warmup      time.Duration `json:"warmup_ns"`
		Rounds      int           `json:"rounds"`
		MaxRequests int           `json:"max_requests"`
		Concurrency []int         `json:"concurrency"`
		CascadeConc []int         `json:"cascade_concurrency"`
		Scenarios   []string      `json:"scenarios"`
		Preflights  []preflight   `json:"cascade_preflights,omitempty"`
		Cells       []*cell       `json:"cells"`
		Probes      probeResults  `json:"probes"`
	}{runtime.Version(), runtime.NumCPU(), o.duration, o.warmup, o.rounds, o.maxRequests, o.concurrency,
		o.cascadeConcurrency, names, preflights, cells, probes}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
