package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkVersusProxy sends the same streamed and unary chats through the
// coordinator (decode only) and through a bare httputil.ReverseProxy to the
// same instant fake worker, in one process: the coordinator's cost over
// the proxy's, allocations included, without the noise of separate runs.
func BenchmarkVersusProxy(b *testing.B) {
	var events strings.Builder
	for i := range 31 {
		fmt.Fprintf(&events, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"}}]}\n\n", i)
	}
	events.WriteString("data: [DONE]\n\n")
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.Header.Get("X-Bench"), "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, events.String())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}`)
	}))
	b.Cleanup(gw.Close)
	target, _ := url.Parse(gw.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	proxySrv := httptest.NewServer(proxy)
	b.Cleanup(proxySrv.Close)
	st := startStack(b, gw.URL, "", decodeOnly)
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
		kind := map[bool]string{false: "unary", true: "stream"}[stream]
		for _, t := range []struct{ name, url string }{{"proxy", proxySrv.URL}, {"coordinator", st.restURL}} {
			b.Run(kind+"/"+t.name, func(b *testing.B) {
				b.ReportAllocs()
				start := processCPU(b)
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodPost, t.url+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Bench", kind)
					resp, err := st.client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n == 0 {
						b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
					}
				}
				b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time (user and system) this process used so far:
// unlike the wall time, it does not count waiting for other processes.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
