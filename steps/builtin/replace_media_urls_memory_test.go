package builtin_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/membudget"
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
// image URLs of base and its own account of b (nil for none), closed when
// it ends, and returns each request's error and the peak heap above the
// heap at the start (after a GC), in bytes.
func runMediaRequests(step steps.Step, base string, n, images int, b *membudget.Budget) ([]error, uint64) {
	runtime.GC()
	before := heapNow()
	h := sampleHeap()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a := b.Open()
			defer a.Close()
			rc := mediaContext(mediaURLBody(base, images))
			errs[i] = step.Execute(membudget.WithAccount(context.Background(), a), rc)
		})
	}
	wg.Wait()
	peak := h.Peak()
	return errs, peak - min(peak, before)
}

// The peak heap of one request of 64 images of 10 MiB each, the issue's
// vector, with max_total_download_size raised to let it through, to see
// what the images themselves cost: peak/downloaded is the peak heap over
// the bytes downloaded.
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
				errs, peak := runMediaRequests(step, o.URL, 1, 64, nil)
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

// A downloaded image is held once, as the base64 in its data URI: one
// request of 16 images of 4 MiB (64 MiB, the default cap) peaks at their
// 85 MiB inlined and little more. Before, the downloaded bytes and their
// inlined copy lived together: twice the download, 128 MiB.
func TestReplaceMediaURLsHoldsEachImageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads 64 MiB over loopback")
	}
	const images, size = 16, 4 << 20
	// Collect often, so the sampled heap is what is held, not garbage a
	// loaded machine's collector has not reached yet.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	for _, chunked := range []bool{false, true} {
		o := newMediaOrigin(t, serveGenerated(size, chunked))
		step := newReplaceMedia(t, map[string]any{"download_timeout": "2m"})
		errs, heap := runMediaRequests(step, o.URL, 1, images, nil)
		require.NoError(t, errs[0])
		inlined := images * framedSize(size)
		// Gathering a body of unknown length holds its raw chunks until it
		// has ended: up to max_concurrent_downloads (10) of them at once.
		margin := int64(16 << 20)
		if chunked {
			margin += 10 * size
		}
		assert.Less(t, int64(heap), inlined+margin, "chunked=%t: peak heap %d MiB for %d MiB inlined", chunked, heap>>20, inlined>>20)
		t.Logf("chunked=%t: peak heap %d MiB for %d MiB downloaded, %d MiB inlined", chunked, heap>>20, images*size>>20, inlined>>20)
	}
}
