package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseResidentSet(t *testing.T) {
	t.Parallel()
	status := "Name:\tcoordinator\nVmPeak:\t 1000 kB\nVmHWM:\t  218200 kB\nVmRSS:\t   13520 kB\n" +
		"RssAnon:\t    9428 kB\nRssFile:\t    4092 kB\nRssShmem:\t       0 kB\nThreads:\t7\n"
	rs, err := parseResidentSet([]byte(status))
	require.NoError(t, err)
	assert.Equal(t, residentSet{RSS: 13520 << 10, HWM: 218200 << 10, Anon: 9428 << 10, File: 4092 << 10}, rs)

	_, err = parseResidentSet([]byte("VmRSS:\t1 kB\nVmHWM:\t1 kB\nRssAnon:\t1 kB\n"))
	assert.Error(t, err, "no RssFile")
	_, err = parseResidentSet([]byte("VmRSS:\tmany kB\nVmHWM:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n"))
	assert.Error(t, err)
}

func TestParseGoMetrics(t *testing.T) {
	t.Parallel()
	raw := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n" +
		"go_goroutines_other 9\ngo_memstats_heap_inuse_bytes 3.2505856e+07\ngo_memstats_stack_inuse_bytes 65536\n"
	var s idleSample
	require.NoError(t, parseGoMetrics([]byte(raw), &s))
	assert.Equal(t, idleSample{Goroutines: 42, HeapInuse: 32505856, StackInuse: 65536}, s)
	assert.Error(t, parseGoMetrics([]byte("go_goroutines 1\n"), &s))
}

func TestMemoryReport(t *testing.T) {
	t.Parallel()
	results := []memoryResult{
		{Scenario: "mem-tokens-20mb", BodyBytes: 20e6, IdleRSS: 30e6, PeakRSS: 70e6, ProxyIdle: 10e6, ProxyPeak: 11e6, Goal: 3},
		{Scenario: "mem-tokens-20mb-decode", BodyBytes: 20e6, IdleRSS: 30e6, PeakRSS: 90e6, Goal: 2},
		{Scenario: "mem-image-40mb", BodyBytes: 40e6, Goal: 3, Err: "status 502\nmore"},
	}
	assert.InDelta(t, 2.0, results[0].over(), 1e-9)
	assert.InDelta(t, 0.05, results[0].proxyOver(), 1e-9)
	var w bytes.Buffer
	writeMemory(&w, results)
	out := w.String()
	assert.Contains(t, out, "2.00x")
	assert.Contains(t, out, "PASS")
	assert.Contains(t, out, "FAIL (1.50x over)", "3x against a 2x goal")
	assert.Contains(t, out, "ABORTED: status 502")
	assert.NotContains(t, out, "more", "only an error's first line")
	w.Reset()
	writeMemory(&w, nil)
	assert.Empty(t, w.String())
}

func TestIdleReport(t *testing.T) {
	t.Parallel()
	r := &idleResult{
		Streams: 100,
		Base:    idleSample{Goroutines: 20, RSS: 10 << 20, HeapInuse: 4 << 20},
		Open:    idleSample{Goroutines: 520, RSS: 10<<20 + 100*100<<10, HeapInuse: 4<<20 + 100*30<<10},
		End:     idleSample{Goroutines: 21},
	}
	var w bytes.Buffer
	writeIdle(&w, r)
	out := w.String()
	assert.Regexp(t, `goroutines +5\.00 `, out)
	assert.Regexp(t, `RSS KB +100\.0 `, out)
	assert.Regexp(t, `heap in use KB +30\.0 `, out)
	assert.Regexp(t, `10k streams MB +987 +< 700 +FAIL`, out, "10 MB at rest and 10,000 times 100 KB")
	assert.Equal(t, 3, strings.Count(out, "FAIL"), "5 goroutines and 100 KB miss every goal:\n%s", out)
	assert.Contains(t, out, "20 before, 520 open, 21 after")

	r.Open = idleSample{Goroutines: 320, RSS: 10<<20 + 100*60<<10}
	w.Reset()
	writeIdle(&w, r)
	assert.NotContains(t, w.String(), "FAIL", "3 goroutines and 60 KB a stream (596 MB for 10k) meet every goal:\n%s", w.String())
}

func TestNewTemplates(t *testing.T) {
	t.Parallel()
	chat := chatBody1KB(true)
	assert.InDelta(t, 1024, len(chat), 100, "about 1 KB")
	assert.True(t, json.Valid(chat))
	assert.Contains(t, string(chat), `"stream":true`)
	assert.Contains(t, string(chatBody1KB(false)), `"stream":false`)

	text := longTextBytes(64 << 10)
	assert.GreaterOrEqual(t, len(text), 64<<10)
	assert.Less(t, len(text), 64<<10+200)

	tpl, err := imageChat(imageBodyBytes, text)
	require.NoError(t, err)
	assert.InDelta(t, imageBodyBytes+len(text), len(tpl.body), imageBodyBytes/100)
	body := tpl.fill(nil, 5)
	assert.True(t, json.Valid(body))
	assert.Contains(t, string(body), string(text[:100]))

	tokens, err := tokenPromptOfSize(1_000_000)
	require.NoError(t, err)
	assert.InDelta(t, 1_000_000, len(tokens.body), 50_000)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		warm, err := warmupBody(path, 3)
		require.NoError(t, err)
		assert.True(t, json.Valid(warm), path)
		assert.Less(t, len(warm), 32<<10, path)
	}
}

func TestVisitOrder(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []int{0, 1, 2}, visitOrder(scenario{}, 3))
	assert.Equal(t, []int{2, 0, 1}, visitOrder(scenario{paced: true}, 3), "the coordinator first, to pace the others")
}
