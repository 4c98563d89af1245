package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 3.3554432e+07
process_resident_memory_bytes 7.7824e+07
go_goroutines_total_fake{x="y"} 9
`

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	r, err := parseMetrics(strings.NewReader(exposition))
	require.NoError(t, err)
	assert.Equal(t, resources{Goroutines: 42, RSS: 77824000, HeapInuse: 32 << 20}, r)

	_, err = parseMetrics(strings.NewReader("go_goroutines 1\n"))
	assert.ErrorContains(t, err, "want go_goroutines, process_resident_memory_bytes and go_memstats_heap_inuse_bytes")
	_, err = parseMetrics(strings.NewReader("go_goroutines many\n"))
	assert.Error(t, err)
}

func TestSettleConditions(t *testing.T) {
	t.Parallel()
	g := func(n ...int) []resources {
		var h []resources
		for _, x := range n {
			h = append(h, resources{Goroutines: x})
		}
		return h
	}
	assert.False(t, steady(g(20, 20, 20)), "too few samples")
	assert.False(t, steady(g(20, 14, 13, 13, 12)), "still falling")
	assert.True(t, steady(g(40, 13, 13, 13, 13)))
	assert.True(t, backTo(23)(g(900, 23, 23, 23, 23)))
	assert.False(t, backTo(23)(g(900, 30, 25, 21, 20)), "still falling")
	assert.False(t, backTo(23)(g(24, 24, 24, 24)), "steady above the limit")
}

// TestSettle serves a falling goroutine count and checks settle waits for
// the condition, and gives up with errUnsettled.
func TestSettle(t *testing.T) {
	t.Parallel()
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := max(13, 100-40*scrapes.Add(1))
		_, _ = w.Write([]byte(strings.Replace(exposition, "go_goroutines 42", "go_goroutines "+strconv.FormatInt(n, 10), 1)))
	}))
	defer srv.Close()
	s := newScraper(srv.URL)
	r, err := s.settle(t.Context(), time.Minute, backTo(15))
	require.NoError(t, err)
	assert.Equal(t, 13, r.Goroutines)

	_, err = s.settle(t.Context(), 0, backTo(5))
	assert.ErrorIs(t, err, errUnsettled)
}
