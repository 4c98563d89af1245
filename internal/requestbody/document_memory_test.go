package requestbody

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// Issue 34: a body of millions of tiny messages or content blocks must not
// cost many times its size while it is parsed. These bodies are what a
// hostile client sends: about 63 MiB, the largest a 64 MiB cap lets in.

const hostileSize = 63 << 20

// hostileBody is a body of format f, about size bytes, of one value
// repeated (a content block, a message or an input item) inside head and
// tail.
func hostileBody(head, item, tail string, size int) []byte {
	n := (size - len(head) - len(tail)) / (len(item) + 1)
	b := bytes.NewBuffer(make([]byte, 0, size))
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// memoryShape is a body shape: its name, format, and the body, built
// when asked for (they are big).
type memoryShape struct {
	name   string
	format legs.Format
	body   func() []byte
}

// memoryShapes are the hostile shapes, and a flat body of the same size.
func memoryShapes(size int) []memoryShape {
	repeated := func(head, item, tail string) func() []byte {
		return func() []byte { return hostileBody(head, item, tail, size) }
	}
	flat := func() []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + string(bytes.Repeat([]byte("a"), size-64)) + `"}]}`)
	}
	return []memoryShape{
		{"chat blocks", legs.FormatChat, repeated(`{"model":"m","messages":[{"role":"user","content":[`, `{"type":"text","text":""}`, `]}]}`)},
		{"chat messages", legs.FormatChat, repeated(`{"model":"m","messages":[`, `{"role":"user","content":""}`, `]}`)},
		{"messages blocks", legs.FormatMessages, repeated(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[`, `{"type":"text","text":""}`, `]}]}`)},
		{"responses items", legs.FormatResponses, repeated(`{"model":"m","input":[`, `{"role":"user","content":"x"}`, `]}`)},
		{"responses blocks", legs.FormatResponses, repeated(`{"model":"m","input":[{"role":"user","content":[`, `{"type":"input_text","text":""}`, `]}]}`)},
		{"flat", legs.FormatChat, flat},
	}
}

// parseCost parses body as format f within lim with the collector off,
// and returns the bytes allocated meanwhile (what the heap would grow by
// with no collection: a bound on the parse's peak) and those still held
// by the document after a collection.
func parseCost(body []byte, f legs.Format, lim Limits) (alloc, retained uint64, err error) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after, kept runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	doc, err := ParseLimited(body, f, lim)
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&kept)
	runtime.KeepAlive(doc)
	return after.TotalAlloc - before.TotalAlloc, kept.HeapAlloc - min(kept.HeapAlloc, before.HeapAlloc), err
}

// memoryTestMu keeps the measuring tests from running at once: each turns
// the collector off for the whole process.
var memoryTestMu sync.Mutex

// noLimits are limits no hostile body reaches, to measure the parse
// itself rather than the refusal.
var noLimits = Limits{Messages: 1 << 30, ContentBlocks: 1 << 30, JSONNodes: 1 << 30}

func TestParseCostIsProportionalToTheBody(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("parses 63 MiB bodies: slow with -short or -race")
	}
	memoryTestMu.Lock()
	defer memoryTestMu.Unlock()
	for _, tc := range memoryShapes(hostileSize) {
		body := tc.body()
		alloc, retained, err := parseCost(body, tc.format, noLimits)
		require.NoError(t, err, tc.name)
		t.Logf("%-16s body %5.1f MiB: parse allocates %6.1f MiB (%.2fx), document keeps %5.1f MiB",
			tc.name, mib(len(body)), mib(int(alloc)), float64(alloc)/float64(len(body)), mib(int(retained)))
		assert.LessOrEqual(t, alloc, uint64(3*len(body)), "%s: the parse allocates at most 3x the body", tc.name)

		// The defaults refuse the hostile shapes, at no more cost.
		alloc, _, err = parseCost(body, tc.format, Limits{})
		if tc.name != "flat" {
			var le *jsonbody.LimitError
			require.ErrorAs(t, err, &le, tc.name)
		}
		assert.LessOrEqual(t, alloc, uint64(3*len(body)), "%s: refused at most 3x the body", tc.name)
	}
}

// TestParseCostJustUnderTheLimits parses bodies of each hostile shape
// with as many blocks, messages and values as the default limits allow.
func TestParseCostJustUnderTheLimits(t *testing.T) {
	memoryTestMu.Lock()
	defer memoryTestMu.Unlock()
	item := `{"type":"text","text":""}`
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"content blocks", hostileBody(`{"messages":[{"role":"user","content":[`, item, `]}]}`, (DefaultMaxContentBlocks-1)*(len(item)+1))},
		{"messages", hostileBody(`{"messages":[`, `{"role":"user","content":""}`, `]}`, (DefaultMaxMessages-1)*29)},
		{"JSON values", hostileBody(`{"messages":[],"tools":[`, `0`, `]}`, (DefaultMaxJSONNodes-8)*2)},
		{"media parts", hostileBody(`{"messages":[{"role":"user","content":[`, `{"image_url":"x"}`, `]}]}`, (DefaultMaxContentBlocks-1)*18)},
	} {
		alloc, _, err := parseCost(tc.body, legs.FormatChat, Limits{})
		if tc.name == "media parts" {
			// More media parts than MaxIndexed: refused, not kept.
			var le *jsonbody.LimitError
			require.ErrorAs(t, err, &le, tc.name)
		} else {
			require.NoError(t, err, tc.name)
		}
		t.Logf("%-14s body %5.1f MiB: parse allocates %5.2f MiB", tc.name, mib(len(tc.body)), mib(int(alloc)))
		assert.LessOrEqual(t, alloc, uint64(3*len(tc.body)), "%s: the parse allocates at most 3x the body", tc.name)
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

// BenchmarkParseHostile reports, per shape, the bytes a parse allocates
// per body byte (alloc/body) with the limits off: the hostile shapes
// against a flat body of the same size.
func BenchmarkParseHostile(b *testing.B) {
	for _, tc := range memoryShapes(hostileSize) {
		b.Run(tc.name, func(b *testing.B) {
			body := tc.body()
			b.SetBytes(int64(len(body)))
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			for b.Loop() {
				if _, err := ParseLimited(body, tc.format, noLimits); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(len(body)), "alloc/body")
		})
	}
}

// TestCheckCostIsProportionalToTheBody checks a Messages and a Responses
// body of as many content blocks as the default limits and apibody's
// MaxItems let in: the check keeps nothing and allocates little.
func TestCheckCostIsProportionalToTheBody(t *testing.T) {
	memoryTestMu.Lock()
	defer memoryTestMu.Unlock()
	for _, tc := range []struct {
		name       string
		format     legs.Format
		head, item string
	}{
		{"messages", legs.FormatMessages, `{"max_tokens":1,"messages":[`, `{"type":"text","text":""}`},
		{"responses", legs.FormatResponses, `{"input":[`, `{"type":"input_text","text":""}`},
	} {
		blocks := tc.item + strings.Repeat(","+tc.item, 31)
		msg := `{"role":"user","content":[` + blocks + `]}`
		body := hostileBody(tc.head, msg, `]}`, 4000*(len(msg)+1))
		doc, err := Parse(body, tc.format)
		require.NoError(t, err)
		var before, after runtime.MemStats
		func() {
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			runtime.GC()
			runtime.ReadMemStats(&before)
			err = doc.Check()
			runtime.ReadMemStats(&after)
		}()
		require.NoError(t, err, tc.name)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%-9s body %4.1f MiB: check allocates %5.2f MiB", tc.name, mib(len(body)), mib(int(alloc)))
		if raceEnabled {
			continue // the race detector's instrumentation allocates
		}
		assert.LessOrEqual(t, alloc, uint64(len(body)), "%s: the check allocates at most the body", tc.name)
	}
}
