package main

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/steptest"
)

// tracingFrames are the functions whose allocations a request would not
// make in a build without OpenTelemetry: the library's, and the
// coordinator's own span plumbing.
var tracingFrames = []string{
	"go.opentelemetry.io/",
	"/internal/spans.",
	"/internal/gateway.startLeg",
	"/internal/gateway.endLeg",
	"/steps.endStepSpan",
	"requestAttributes", // the REST front's and the service's
	"endServerSpan",
}

// tracingAllocs is the number of objects allocated so far, per the memory
// profile, by stacks that pass through a tracing frame.
func tracingAllocs() int64 {
	runtime.GC()
	runtime.GC() // the profile is as of the last completed cycle
	n, _ := runtime.MemProfile(nil, true)
	records := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(records, true)
	var total int64
	for _, r := range records[:n] {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if tracesFrame(f.Function) {
				total += r.AllocObjects
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}

func tracesFrame(fn string) bool {
	for _, t := range tracingFrames {
		if strings.Contains(fn, t) {
			return true
		}
	}
	return false
}

// TestTracingOffAllocatesNothing: with tracing off (the default), a
// request, REST through the gRPC service to a leg and back, allocates
// nothing in OpenTelemetry or the coordinator's span plumbing, as if it
// were built without them. The memory profile counts every allocation
// while it runs. Not parallel: the profile rate is the process's.
func TestTracingOffAllocatesNothing(t *testing.T) {
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}`)
	})
	st := startStack(t, gw.URL, "", decodeOnly)
	send := func() {
		resp, err := st.client.Post(st.restURL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	send() // warm: connections, lazily built state
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = rate }()
	before := tracingAllocs()
	const requests = 50
	for range requests {
		send()
	}
	assert.Zero(t, tracingAllocs()-before, "objects allocated for tracing over %d requests with tracing off", requests)
}
