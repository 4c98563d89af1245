package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// writeCascadeHeader describes the cascade scenarios and what their
// preflight found.
func writeCascadeHeader(w io.Writer, o options, preflights []preflight) {
	fmt.Fprintf(w, "\ncascade scenarios: a second simulator (%s, --strict=true: every leg checked against the wire contract) with its render service;\n", cascadeSimName)
	fmt.Fprintf(w, "  coordinators: %s = %s with %s and %s (config/dev.yaml), %s = %s; log_level 1\n",
		cascadeName, strings.Join(cascadePipeline.steps, " > "), cascadePipeline.kv, cascadePipeline.ec,
		decodeOnlyName, strings.Join(decodeOnly.steps, " > "))
	fmt.Fprintf(w, "  per target per cell: %v warm-up, then up to %v / %d requests in %d rounds (%s, %s in turn) at %s concurrent; hop = that coordinator\n",
		o.warmup, o.duration, o.maxRequests, o.rounds, decodeOnlyName, cascadeName, joinInts(o.cascadeConcurrency))
	fmt.Fprintf(w, "  every request has its own prompt (a nonce in its text, first token IDs or PNG), so conditional-decode misses (412) and the cascade\n")
	fmt.Fprintf(w, "  runs encode (images), prefill and decode; tripwire: every request sends %s: %s, which breaks an answer the\n", simFaultHeader, conditionalTripwire)
	fmt.Fprintf(w, "  conditional leg gives from a remembered prompt, so a request that skipped prefill fails the run\n")
	for _, pf := range preflights {
		fmt.Fprintf(w, "  %s: %s; body %d bytes; prompt_tokens %s %d, %s %d;\n    preflight: a repeated prompt tripped the wire (HTTP %d, %s)\n",
			pf.Scenario, scenarioAbout(pf.Scenario), pf.BodyBytes, cascadeName, pf.PromptTokens, decodeOnlyName, pf.DecodeTokens,
			pf.RepeatStatus, logError(pf.RepeatLog))
	}
}

// logError is the error a JSON log line reports, else the line.
func logError(line string) string {
	var l struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(line), &l) == nil && l.Error != "" {
		return l.Error
	}
	return line
}

// scenarioAbout is the description of the named scenario.
func scenarioAbout(name string) string {
	i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
	if i < 0 {
		return ""
	}
	return scenarios[i].about
}

// writeCascadeCell prints a cascade cell: the decode-only coordinator, then
// the cascade, and their ratios.
func writeCascadeCell(w io.Writer, c *cell) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "coordinator\trequests\treq/s\tTTFB p50\tTTFB p99\ttotal p50\tadded TTFB p50\tCPU/req\tsyscalls/req\tsim CPU/req\tclient CPU/req\t")
	for i, r := range c.Targets {
		s := r.Summary
		added := "-"
		if i > 0 {
			added = micros(s.AddedP50)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t\n", r.Target, s.Requests, s.PerSecond,
			micros(s.TTFBp50), micros(s.TTFBp99), micros(s.TotalP50), added,
			micros(s.CPUPerReq), s.SyscallsPerReq, micros(s.SimPerReq), micros(s.SelfPerReq))
	}
	_ = tw.Flush()
	r := cascadeRatiosOf(c)
	fmt.Fprintf(w, "%s / %s: TTFB p50 %s, TTFB p99 %s, coordinator CPU/req %s (+%s µs), sim CPU/req %s\n",
		cascadeName, decodeOnlyName, r.ttfbP50, r.ttfbP99, r.cpu, r.cpuAdded, r.sim)
}

// cascadeRatios compare the cascade with decode-only in one cell.
type cascadeRatios struct {
	ttfbP50, ttfbP99, cpu, cpuAdded, sim string
}

func cascadeRatiosOf(c *cell) cascadeRatios {
	if c.Err != "" || len(c.Targets) < 2 {
		return cascadeRatios{"-", "-", "-", "-", "-"}
	}
	decode, cascade := c.Targets[0].Summary, c.Targets[1].Summary
	return cascadeRatios{
		ttfbP50:  ratioString(cascade.TTFBp50, decode.TTFBp50),
		ttfbP99:  ratioString(cascade.TTFBp99, decode.TTFBp99),
		cpu:      ratioString(cascade.CPUPerReq, decode.CPUPerReq),
		cpuAdded: micros(cascade.CPUPerReq - decode.CPUPerReq),
		sim:      ratioString(cascade.SimPerReq, decode.SimPerReq),
	}
}

// ratioString is a/b as "1.23x", or "-" without a meaningful ratio.
func ratioString(a, b time.Duration) string {
	if r, ok := ratio(a, b); ok {
		return fmt.Sprintf("%.2fx", r)
	}
	return "-"
}

// writeCascadeSummary prints one line per cascade cell; nothing when there
// are none.
func writeCascadeSummary(w io.Writer, cells []*cell) {
	cells = slices.DeleteFunc(slices.Clone(cells), func(c *cell) bool { return !c.Cascade })
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== summary: coordinator with the full cascade vs decode-only, same requests (µs; CPU per request) ==\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tconc\tdecode-only TTFB p50/p99\tcascade TTFB p50/p99\tTTFB p50 ratio\tdecode-only CPU\tcascade CPU\tCPU ratio\tsim CPU decode-only/cascade")
	for _, c := range cells {
		if c.Err != "" {
			fmt.Fprintf(tw, "%s\t%d\tABORTED\t-\t-\t-\t-\t-\t-\n", c.Scenario, c.Concurrency)
			continue
		}
		decode, cascade := c.Targets[0].Summary, c.Targets[1].Summary
		r := cascadeRatiosOf(c)
		fmt.Fprintf(tw, "%s\t%d\t%s / %s\t%s / %s\t%s\t%s\t%s\t%s\t%s / %s\n", c.Scenario, c.Concurrency,
			micros(decode.TTFBp50), micros(decode.TTFBp99), micros(cascade.TTFBp50), micros(cascade.TTFBp99), r.ttfbP50,
			micros(decode.CPUPerReq), micros(cascade.CPUPerReq), r.cpu, micros(decode.SimPerReq), micros(cascade.SimPerReq))
	}
	_ = tw.Flush()
}

// joinInts formats a list of ints as a comma list.
func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ",")
}
