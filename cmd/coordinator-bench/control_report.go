package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// controlSummary is what the report shows of one route.
type controlSummary struct {
	DirectP50, DirectP99 time.Duration
	CallP50, CallP99     time.Duration
	AddedP50, AddedP99   time.Duration
}

// summarizeControl computes r's percentiles; the added time is taken per
// round (the call minus the direct fan-out of the same round).
func summarizeControl(r controlRouteResult) controlSummary {
	n := min(len(r.Direct), len(r.Calls))
	added := make([]time.Duration, n)
	for i := range n {
		added[i] = r.Calls[i] - r.Direct[i]
	}
	direct, calls := slices.Clone(r.Direct), slices.Clone(r.Calls)
	slices.Sort(direct)
	slices.Sort(calls)
	slices.Sort(added)
	return controlSummary{
		DirectP50: percentile(direct, 50), DirectP99: percentile(direct, 99),
		CallP50: percentile(calls, 50), CallP99: percentile(calls, 99),
		AddedP50: percentile(added, 50), AddedP99: percentile(added, 99),
	}
}

// writeControl prints the control-fanout probe; nothing without one.
func writeControl(w io.Writer, r *controlResult) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\n== control fan-out: %d engines (half prefill, half decode) on their own loopback ports, control.concurrency %d ==\n",
		r.Engines, r.Concurrency)
	fmt.Fprintf(w, "per round: the ControlService call over gRPC (every worker) and the same engine route POSTed from here to every engine\n")
	fmt.Fprintf(w, "  at once on warm connections (slowest = the last answer); added = call - slowest, per round; all in ms\n")
	if r.Err != "" {
		fmt.Fprintf(w, "ABORTED: %s\n", firstLine(r.Err))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\trounds\tslowest p50\tslowest p99\tcall p50\tcall p99\tadded p50\tadded p99\tgoal\tp50\tp99\t")
	for _, route := range r.Routes {
		s := summarizeControl(route)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t<= %s\t%s\t%s\t\n", route.Call, len(route.Calls),
			millis(s.DirectP50), millis(s.DirectP99), millis(s.CallP50), millis(s.CallP99),
			millis(s.AddedP50), millis(s.AddedP99), millis(controlAddedGoal),
			passFail(s.AddedP50 <= controlAddedGoal), passFail(s.AddedP99 <= controlAddedGoal))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "coordinator CPU per control call: %s ms; this process's per direct fan-out: %s ms", millis(r.CPUPerCall), millis(r.DirectCPU))
	if x, ok := ratio(r.CPUPerCall, r.DirectCPU); ok {
		fmt.Fprintf(w, " (%.2fx)", x)
	}
	fmt.Fprintln(w)
}

// millis formats d in milliseconds with two decimals.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}
