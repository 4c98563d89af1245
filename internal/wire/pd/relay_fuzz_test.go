package pd

import (
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/steptest"
)

// FuzzRelayEvents feeds an arbitrary text/event-stream to relayEvents, cut
// into reads of fuzzed sizes (cuts), and checks that the events it hands on
// are refSSE's, in batches that add up to them (seeds here and in
// testdata/fuzz/FuzzRelayEvents).
func FuzzRelayEvents(f *testing.F) {
	for _, seed := range []struct{ stream, cuts string }{
		{"data: {\"a\":1}\n\ndata: [DONE]\n\n", ""},
		{"data: x\r\n\r\ndata: y\r\n\r\n", "\x01\x02"},
		{"data:x\n\ndata\n\ndata:\n\n", "\x00"},
		{"data: a\ndata: b\n\n: ping\nevent: e\nid: 1\nretry: 5\ndata: c\n\n", "\x03\x07"},
		{"data: x\n\ndata: tail", "\x05"},
		{"data: a\rb\n\n\r\n\n\n", ""},
		{"\ufeffdata: bom\n\n", ""},
		{"data:  two spaces\n\ndata:\ttab\n\n", "\x00\x00\x09"},
		{"DATA: upper\n\ndata : spaced\n\n", ""},
		{"data: " + strings.Repeat("z", 40<<10) + "\n\n", "\xff"},
		{"", ""},
	} {
		f.Add([]byte(seed.stream), []byte(seed.cuts))
	}
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		sink := &steptest.Sink{}
		err := relayEvents(&cutReader{data: stream, cuts: cuts}, sink)
		if badEventType(stream) {
			require.ErrorContains(t, err, "event type not UTF-8 or longer than", "a type that cannot travel as a proto string fails the stream")
			return
		}
		require.NoError(t, err)
		want := refSSE(stream)
		assert.Equal(t, want, sink.EventStrings())
		total := 0
		for _, n := range sink.Batches {
			assert.Positive(t, n, "no empty batch")
			total += n
		}
		assert.Equal(t, len(want), total)
	})
}

// badEventType reports whether the stream has an "event" field whose value
// is not UTF-8 or longer than maxNameSize: the relay refuses the stream.
func badEventType(stream []byte) bool {
	for _, line := range strings.Split(string(stream), "\n") {
		name, value, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
		if !ok || name != "event" {
			continue
		}
		value = strings.TrimPrefix(value, " ")
		if len(value) > maxNameSize || !utf8.ValidString(value) {
			return true
		}
	}
	return false
}

// refSSE is the data of the events of an event stream as the HTML spec's
// event-stream interpretation gives them ("data" field only: comments and
// other fields are dropped; "data" alone is an empty data line; one space
// after the colon is dropped; data lines are joined with "\n"; a blank line
// dispatches an event that has data). It departs from the spec where the
// relay does, on purpose: lines end at LF or CRLF only (a lone CR is data,
// as no worker sends one), a byte order mark is not stripped, and a last
// event cut off before its blank line is still delivered.
func refSSE(stream []byte) []string {
	events := []string{}
	var data []string
	open := false
	lines := strings.Split(string(stream), "\n")
	for i, line := range lines {
		if i == len(lines)-1 && line == "" {
			break // the stream ended with a line end
		}
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			if open {
				events = append(events, strings.Join(data, "\n"))
			}
			data, open = nil, false
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		if name != "data" {
			continue
		}
		data, open = append(data, strings.TrimPrefix(value, " ")), true
	}
	if open {
		events = append(events, strings.Join(data, "\n"))
	}
	return events
}

// cutReader returns data in reads of 1 to 64 bytes, sized by cuts in turn
// (all of what is left once cuts run out).
type cutReader struct {
	data, cuts []byte
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.cuts) > 0 {
		n = min(n, int(r.cuts[0]%64)+1)
		r.cuts = r.cuts[1:]
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestRelayEventsBoundsMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream io.Reader
		err    string
	}{
		{"one endless line", io.MultiReader(strings.NewReader("data: "), endless('x')), "line longer than"},
		{"one endless event", endlessLines("data: " + strings.Repeat("y", 1000) + "\n"), "event larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			counted := &countingReader{r: tt.stream}
			sink := &steptest.Sink{}
			err := relayEvents(counted, sink)
			require.ErrorContains(t, err, tt.err)
			assert.Empty(t, sink.Received, "nothing of the oversized event reaches the client")
			assert.LessOrEqual(t, counted.n, int64(maxEventSize+256<<10), "the relay stops reading a few buffers past maxEventSize")
		})
	}
}

// endless is an infinite stream of one byte.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// endlessLines repeats line forever.
func endlessLines(line string) io.Reader {
	return &repeatReader{line: []byte(line)}
}

type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
