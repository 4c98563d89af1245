package steps_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinator-project/coordinator/steps"
)

// serveGenerated answers every path with a PNG of size bytes made up on the
// fly, 32 KiB at a time, so that the test itself holds none of it; with a
// Content-Length unless chunked.
func serveGenerated(size int, chunked bool) http.HandlerFunc {
	block := bytes.Repeat([]byte{7}, 32<<10)
	copy(block, mediaPNG)
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		for left := size; left > 0; {
			n, err := w.Write(block[:min(left, len(block))])
			if err != nil {
				return
			}
			left -= n
			if chunked {
				w.(http.Flusher).Flush()
			}
		}
	}
}

// heapSampler samples the bytes of live and not yet swept heap objects
// (runtime/metrics /memory/classes/heap/objects:bytes) every millisecond
// until stopped, and keeps the largest figure.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			h.peak = max(h.peak, heapNow())
			select {
			case <-h.stop:
				h.peak = max(h.peak, heapNow())
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Peak stops sampling and returns the largest figure seen.
func (h *heapSampler) Peak() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// mediaURLBody is a chat request with n image parts pointing at base.
func mediaURLBody(base string, n int) []byte {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = mediaImagePart(base + "/" + strconv.Itoa(i) + ".png")
	}
	return mediaChatBody(parts...)
}

// runMediaRequests runs the step on n requests at once, each with images
// image URLs of base, and returns each request's error and the peak heap
// above the heap at the start (after a GC), in bytes.
func runMediaRequests(step steps.Step, base string, n, images int) ([]error, uint64) {
	runtime.GC()
	before := heapNow()
	h := sampleHeap()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rc := mediaContext(mediaURLBody(base, images))
			errs[i] = step.Execute(context.Background(), rc)
		})
	}
	wg.Wait()
	peak := h.Peak()
	return errs, peak - min(peak, before)
}

// The peak heap of one request of 64 images of 10 MiB each, the issue's
// vector, with the total cap lifted (max_total_download_size 0... here as
// large as the images) to see what the images themselves cost.
func BenchmarkReplaceMediaURLsPeakHeap(b *testing.B) {
	for _, chunked := range []bool{false, true} {
		name := "content-length"
		if chunked {
			name = "chunked"
		}
		b.Run(name, func(b *testing.B) {
			o := newMediaOrigin(b, serveGenerated(10<<20, chunked))
			step := newReplaceMedia(b, map[string]any{"max_download_size": 10, "max_total_download_size": 640})
			var worst uint64
			for b.Loop() {
				errs, peak := runMediaRequests(step, o.URL, 1, 64)
				if errs[0] != nil {
					b.Fatal(errs[0])
				}
				worst = max(worst, peak)
			}
			b.ReportMetric(float64(worst)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(worst)/(64*10<<20), "peak/downloaded")
		})
	}
}

var _ = strings.Repeat
