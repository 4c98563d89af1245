package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"

	"google.golang.org/grpc/codes"
)

// simFaultHeader is the simulator's fault-injection header (sim.FaultHeader;
// the soak does not link the simulator). The coordinator forwards it to
// every leg; on gRPC it travels as metadata.
const simFaultHeader = "X-Sim-Fault"

// fault is one injected failure and the answer the client must get for it
// (docs/robustness.md, "Upstream faults and timeouts"): a decode or
// conditional leg's status is relayed, another leg's 4xx passes through and
// its 5xx is a 502; no connection or a cut answer is a 502, a leg that does
// not answer in time a 504; render, encode and prefill are retried after a
// 502/503 or a connection closed before the answer, so a fault limited to
// fewer legs than gateway.retry.max_attempts must not reach the client.
type fault struct {
	// header is the X-Sim-Fault value, and the fault's name in the report.
	header string
	// target is the leg it acts on; a request gets only faults on legs it
	// reaches.
	target legs
	// recovers marks a fault the coordinator's retries absorb: the client
	// must get the whole answer. status and code are then unset.
	recovers bool
	// status is the REST status the client must get.
	status int
	// code is the gRPC code the client must get.
	code codes.Code
	// midStream marks a failure that may come after the first event of a
	// streamed answer: REST then ends the stream with an error event
	// carrying status, gRPC with code after some messages.
	midStream bool
}

// want describes the answer the fault must get, for the report.
func (f *fault) want() string {
	switch {
	case f.recovers:
		return "ok (retried)"
	case f.midStream:
		return fmt.Sprintf("%d / %s, streams: or an error event", f.status, f.code)
	}
	return fmt.Sprintf("%d / %s", f.status, f.code)
}

// faults is every fault the soak injects, drawn uniformly among those on a
// leg the request reaches. Every hang resolves by a timeout of the soak's
// config (gateway.timeout and stream_idle_timeout, the render step's
// timeout).
var faults = []fault{
	{header: "decode=status:503", target: legDecode, status: http.StatusServiceUnavailable, code: codes.Unavailable},
	{header: "decode=status:500", target: legDecode, status: http.StatusInternalServerError, code: codes.Unavailable},
	{header: "decode=close", target: legDecode, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "decode=hang", target: legDecode, status: http.StatusGatewayTimeout, code: codes.DeadlineExceeded},
	{header: "decode=reset-mid-stream", target: legDecode, status: http.StatusBadGateway, code: codes.Unavailable, midStream: true},
	{header: "decode=hang-mid-stream", target: legDecode, status: http.StatusGatewayTimeout, code: codes.DeadlineExceeded, midStream: true},
	{header: "conditional=status:503", target: legConditional, status: http.StatusServiceUnavailable, code: codes.Unavailable},
	{header: "prefill=status:500", target: legPrefill, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "prefill=status:503", target: legPrefill, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "prefill=status:429", target: legPrefill, status: http.StatusTooManyRequests, code: codes.ResourceExhausted},
	{header: "prefill=close", target: legPrefill, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "prefill=hang", target: legPrefill, status: http.StatusGatewayTimeout, code: codes.DeadlineExceeded},
	{header: "prefill=reset-mid-stream", target: legPrefill, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "prefill=hang-mid-stream", target: legPrefill, status: http.StatusGatewayTimeout, code: codes.DeadlineExceeded},
	{header: "prefill=status-once:503", target: legPrefill, recovers: true},
	{header: "prefill=close/2", target: legPrefill, recovers: true},
	{header: "encode=status:500", target: legEncode, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "encode=close/1", target: legEncode, recovers: true},
	{header: "render=status:500", target: legRender, status: http.StatusBadGateway, code: codes.Unavailable},
	{header: "render=hang", target: legRender, status: http.StatusGatewayTimeout, code: codes.DeadlineExceeded},
	{header: "render=status-once:502", target: legRender, recovers: true},
}

// pickFault draws a fault on one of the legs l among faults.
func pickFault(r *rand.Rand, l legs) *fault {
	var n int
	for i := range faults {
		if faults[i].target&l != 0 {
			n++
		}
	}
	pick := r.IntN(n)
	for i := range faults {
		if faults[i].target&l == 0 {
			continue
		}
		if pick == 0 {
			return &faults[i]
		}
		pick--
	}
	panic("unreachable")
}
