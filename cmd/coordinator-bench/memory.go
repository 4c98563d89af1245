package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// The memory probes send one large request to a coordinator started for
// it and report the process's peak resident set over its idle one: the
// kernel's high-water mark (VmHWM in /proc/<pid>/status), reset to the
// current RSS just before the request by writing 5 to /proc/<pid>/clear_refs.
// A small request of the same kind goes first, so connection pools and
// lazily built state are part of the idle figure. The same body (another
// nonce) then goes through the bare proxy, whose peak is the reference.
// Both run on a strict simulator of their own; every probe request carries
// the conditional-decode tripwire (cascade.go), so a probe that skipped
// prefill fails.

// memoryResult is what one memory probe measured.
type memoryResult struct {
	Scenario  string  `json:"scenario"`
	BodyBytes int     `json:"body_bytes"`
	IdleRSS   int64   `json:"idle_rss_bytes"`
	PeakRSS   int64   `json:"peak_rss_bytes"`
	ProxyIdle int64   `json:"proxy_idle_rss_bytes"`
	ProxyPeak int64   `json:"proxy_peak_rss_bytes"`
	Goal      float64 `json:"goal_x_body"`
	Err       string  `json:"error,omitempty"`
}

// over is the coordinator's peak over idle, in multiples of the body.
func (r memoryResult) over() float64 { return timesBody(r.PeakRSS-r.IdleRSS, r.BodyBytes) }

// proxyOver is the proxy's peak over idle, in multiples of the body.
func (r memoryResult) proxyOver() float64 { return timesBody(r.ProxyPeak-r.ProxyIdle, r.BodyBytes) }

func timesBody(n int64, body int) float64 {
	if body <= 0 {
		return 0
	}
	return float64(n) / float64(body)
}

// memorySimName names the memory probes' simulator.
const memorySimName = "sim-memory"

// runMemoryProbes runs the memory probes scs in turn, each on a
// coordinator of its own that it stops afterwards.
func (l *loader) runMemoryProbes(ctx context.Context, f *fleet, coordinatorBin, simBin, self string, scs []scenario, progress io.Writer) ([]memoryResult, error) {
	sim, err := f.startSim(ctx, simBin, memorySimName, true)
	if err != nil {
		return nil, err
	}
	proxy, err := f.startProxy(ctx, self, sim.Gateway)
	if err != nil {
		return nil, err
	}
	var out []memoryResult
	for _, sc := range scs {
		fmt.Fprintf(progress, "memory probe %s...\n", sc.name)
		r, err := l.memoryProbe(ctx, f, coordinatorBin, sim, proxy, sc)
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// memoryProbe measures one probe.
func (l *loader) memoryProbe(ctx context.Context, f *fleet, bin string, sim *procs.Sim, proxy target, sc scenario) (memoryResult, error) {
	r := memoryResult{Scenario: sc.name, Goal: sc.memGoal}
	tpl, err := sc.newTemplate()
	if err != nil {
		return r, err
	}
	body := tpl.fill(nil, l.nonces.Add(1))
	r.BodyBytes = len(body)
	coordinator, err := f.startCoordinator(ctx, bin, "memory-"+sc.name, sim, sc.pipeline)
	if err != nil {
		return r, err
	}
	defer coordinator.hop.Stop(5 * time.Second)
	if r.IdleRSS, r.PeakRSS, err = l.peakOf(ctx, coordinator, sc, body); err != nil {
		return r, coordinator.failed(err)
	}
	body = tpl.fill(body, l.nonces.Add(1))
	if r.ProxyIdle, r.ProxyPeak, err = l.peakOf(ctx, proxy, sc, body); err != nil {
		return r, proxy.failed(err)
	}
	return r, nil
}

// peakOf warms t up with a small request like sc's, then sends body and
// returns t's resident set before it and its peak during it.
func (l *loader) peakOf(ctx context.Context, t target, sc scenario, body []byte) (idle, peak int64, err error) {
	warm, err := warmupBody(sc.path, l.nonces.Add(1))
	if err != nil {
		return 0, 0, err
	}
	if err := l.probePost(ctx, t.base+sc.path, warm); err != nil {
		return 0, 0, fmt.Errorf("warm-up: %w", err)
	}
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(500 * time.Millisecond): // let the warm-up's connections settle
	}
	pid := t.hop.PID()
	before, err := readResidentSet(pid)
	if err != nil {
		return 0, 0, err
	}
	if err := resetPeakRSS(pid); err != nil {
		return 0, 0, err
	}
	if err := l.probePost(ctx, t.base+sc.path, body); err != nil {
		return 0, 0, err
	}
	after, err := readResidentSet(pid)
	return before.RSS, after.HWM, err
}

// warmupBody is a small request for path: a chat with a small image, or a
// completion of a few token IDs.
func warmupBody(path string, nonce uint64) ([]byte, error) {
	tpl, err := tokenPromptTemplate(64)
	if strings.Contains(path, "chat") {
		tpl, err = imageChat(16<<10, nil)
	}
	if err != nil {
		return nil, err
	}
	return tpl.fill(nil, nonce), nil
}

// probePost sends one probe request, tripwire included, with an
// X-Request-Id of its own (the strict simulator wants one on every leg,
// and the bare proxy sends what it got), and checks that it was answered
// 200 with a completion.
func (l *loader) probePost(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "memory-probe-"+strconv.FormatUint(l.nonces.Add(1), 10))
	req.Header.Set(simFaultHeader, conditionalTripwire)
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"choices"`)) {
		return fmt.Errorf("status %d: %s", resp.StatusCode, snippet(answer))
	}
	return nil
}

// The hop cells read each hop process's resident set too: restRSS takes
// VmRSS just before the target's first measured phase (warmed up, not
// serving) and resets the high-water mark; peakRSS takes VmHWM after its
// last one. The rounds interleave the targets, but each process has its
// own mark, so the peak is the hop's own over its measured phases (and the
// pauses between them). peakRSS also takes the two parts of the resident
// set then (RssAnon, RssFile; the kernel keeps no high-water mark of
// either): a Go process's heap does not give pages back for minutes, so
// the anonymous part then is its peak to within what the last collection
// freed. A probe that fails leaves the target's RSS not
// measured (RSSErr) rather than failing the cell.

// restRSS reads the resident set of t's hop (none for direct) into r and
// resets its peak.
func restRSS(t target, r *targetResult) {
	if t.hop == nil {
		return
	}
	pid := t.hop.PID()
	rs, err := readResidentSet(pid)
	if err == nil {
		err = resetPeakRSS(pid)
	}
	if err != nil {
		r.RSSErr = err.Error()
		return
	}
	r.RestRSS = rs.RSS
}

// peakRSS reads the peak resident set of t's hop since restRSS into r,
// and its anonymous and file-backed parts now, unless restRSS failed.
func peakRSS(t target, r *targetResult) {
	if t.hop == nil || r.RSSErr != "" {
		return
	}
	rs, err := readResidentSet(t.hop.PID())
	if err != nil {
		r.RSSErr = err.Error()
		return
	}
	r.PeakRSS, r.EndAnon, r.EndFile = rs.HWM, rs.Anon, rs.File
}

// resetPeakRSS resets the high-water mark of pid (VmHWM) to its current
// resident set.
func resetPeakRSS(pid int) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak RSS: %w", err)
	}
	return nil
}

// residentSet is a process's memory from /proc/<pid>/status, in bytes:
// its resident set (VmRSS) and that set's high-water mark (VmHWM), and
// the resident set's two parts: pages of mapped files (RssFile: the
// binary's code and read-only data, clean and shared with every process
// that maps the same file) and anonymous pages (RssAnon: heap, stacks,
// the process's own).
type residentSet struct {
	RSS, HWM, Anon, File int64
}

// readResidentSet reads pid's residentSet.
func readResidentSet(pid int) (residentSet, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return residentSet{}, err
	}
	return parseResidentSet(raw)
}

// parseResidentSet takes VmRSS, VmHWM, RssAnon and RssFile from a
// /proc/<pid>/status file.
func parseResidentSet(status []byte) (residentSet, error) {
	var rs residentSet
	fields := map[string]*int64{"VmRSS": &rs.RSS, "VmHWM": &rs.HWM, "RssAnon": &rs.Anon, "RssFile": &rs.File}
	found := 0
	for line := range strings.Lines(string(status)) {
		key, value, ok := strings.Cut(line, ":")
		field := fields[key]
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return residentSet{}, fmt.Errorf("%s: %w", key, err)
		}
		*field = kb << 10
		found++
	}
	if found != len(fields) {
		return residentSet{}, errors.New("status: no VmRSS, VmHWM, RssAnon and RssFile")
	}
	return rs, nil
}

// writeMemory prints the memory probes; nothing when there are none.
func writeMemory(w io.Writer, results []memoryResult) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== memory: peak RSS over idle for one request (VmHWM after clear_refs, minus VmRSS before), strict simulator ==\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "probe\tbody MB\tcoordinator idle MB\tpeak over idle MB\tx body\tgoal\tverdict\tproxy over idle MB\tproxy x body\tabout")
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t<= %.0fx\tABORTED: %s\t-\t-\t%s\n", r.Scenario, mb(int64(r.BodyBytes)), r.Goal, firstLine(r.Err), scenarioAbout(r.Scenario))
			continue
		}
		verdict := "PASS"
		if r.over() > r.Goal {
			verdict = fmt.Sprintf("FAIL (%.2fx over)", r.over()/r.Goal)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2fx\t<= %.0fx\t%s\t%s\t%.2fx\t%s\n", r.Scenario, mb(int64(r.BodyBytes)), mb(r.IdleRSS),
			mb(r.PeakRSS-r.IdleRSS), r.over(), r.Goal, verdict, mb(r.ProxyPeak-r.ProxyIdle), r.proxyOver(), scenarioAbout(r.Scenario))
	}
	_ = tw.Flush()
}

// mb formats a byte count in MB (10^6).
func mb(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) }

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
