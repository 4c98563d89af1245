package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rssCell is a measured hop cell whose proxy and coordinator had the
// given peak resident sets, in MB (0: not measured), at rest half that;
// after the phases two fifths of the peak were mapped files, the rest
// anonymous.
func rssCell(proxyMB, coordMB int64) *cell {
	c := testCell("chat", false, [2]int{0, 100}, [2]int{300, 200}, [2]int{400, 250})
	for i, name := range []string{"direct", "proxy", "coordinator"} {
		c.Targets[i].Target = name
	}
	for i, peak := range []int64{proxyMB, coordMB} {
		r := c.Targets[i+1]
		r.RestRSS, r.PeakRSS = peak*1e6/2, peak*1e6
		r.EndFile, r.EndAnon = peak*1e6*2/5, peak*1e6*3/5
		if peak == 0 {
			r.RSSErr = "reset the peak RSS: open /proc/1/clear_refs: permission denied"
		}
	}
	return c
}

func TestRSSVerdict(t *testing.T) {
	t.Parallel()
	aborted := rssCell(10, 12)
	aborted.Err = "boom"
	tests := []struct {
		name           string
		cell           *cell
		ratio, verdict string
	}{
		{name: "under the goal", cell: rssCell(20, 25), ratio: "1.25x", verdict: "(goal <= 1.5x) PASS"},
		{name: "at the goal", cell: rssCell(20, 30), ratio: "1.50x", verdict: "(goal <= 1.5x) PASS"},
		{name: "over the goal", cell: rssCell(10, 30), ratio: "3.00x", verdict: "(goal <= 1.5x) FAIL (2.00x over)"},
		{name: "proxy not measured", cell: rssCell(0, 30), ratio: "-", verdict: "(goal <= 1.5x) not measured"},
		{name: "coordinator not measured", cell: rssCell(10, 0), ratio: "-", verdict: "(goal <= 1.5x) not measured"},
		{name: "aborted", cell: aborted, ratio: "-", verdict: "(goal <= 1.5x) ABORTED"},
		{name: "no coordinator", cell: testCell("chat", false, [2]int{0, 100}, [2]int{300, 200}), ratio: "-", verdict: "(goal <= 1.5x) ABORTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ratio, verdict := rssVerdict(tt.cell)
			assert.Equal(t, tt.ratio, ratio)
			assert.Equal(t, tt.verdict, verdict)
		})
	}
}

func TestHopCellRSSReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cell     *cell
		contains []string
		regexps  []string
		absent   []string
	}{
		{
			name: "measured",
			cell: rssCell(20, 25),
			contains: []string{
				"hop RSS MB  hop peak RSS MB",
				"\ncoordinator peak RSS / proxy peak RSS: 1.25x (goal <= 1.5x) PASS\n" +
					"  after the phases: mapped files (the binary, shared) coordinator 10.0 MB, proxy 8.0 MB; anonymous (its own) coordinator 15.0 MB, proxy 12.0 MB, 1.25x\n",
			},
			regexps: []string{`\n +direct .* -  +- *\n`, `\n +proxy .* 10\.0  +20\.0 *\n`, `\n +coordinator .* 12\.5  +25\.0 *\n`},
			absent:  []string{"not measured"},
		},
		{
			name: "clear_refs failed",
			cell: rssCell(20, 0),
			contains: []string{
				"\ncoordinator peak RSS / proxy peak RSS: - (goal <= 1.5x) not measured\n",
				"\ncoordinator RSS not measured: reset the peak RSS: open /proc/1/clear_refs: permission denied\n",
			},
			regexps: []string{`\n +coordinator .* -  +- *\n`},
			absent:  []string{"proxy RSS not measured", "after the phases"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var w bytes.Buffer
			writeCell(&w, tt.cell)
			out := w.String()
			for _, s := range tt.contains {
				assert.Contains(t, out, s)
			}
			for _, re := range tt.regexps {
				assert.Regexp(t, re, out)
			}
			for _, s := range tt.absent {
				assert.NotContains(t, out, s)
			}
		})
	}
}

func TestSummaryRSSColumns(t *testing.T) {
	t.Parallel()
	aborted := rssCell(10, 12)
	aborted.Err = "boom"
	var w bytes.Buffer
	writeSummary(&w, []*cell{rssCell(10, 30), aborted})
	out := w.String()
	require.Contains(t, out, "peak RSS ratio  RSS goal\n")
	assert.Regexp(t, `\nchat .* 3\.00x +\(goal <= 1\.5x\) FAIL \(2\.00x over\)\n`, out)
	assert.Regexp(t, `\nchat .* ABORTED +-  +-  +-  +-  +-  +-\n`, out)
}
