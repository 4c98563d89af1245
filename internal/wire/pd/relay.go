// The SSE relay (relay.go, relay_lines.go): Relay passes a worker's answer
// on to the client's Sink, through the answer editor (AnswerSink), as it
// arrives: the header, then each server-sent
// event of a stream in batches, or the whole body of a JSON answer.

package pd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// maxEventSize bounds one server-sent event from a worker.
const maxEventSize = 16 << 20

// Relay passes a worker's 2xx answer to the sink: its header, then each
// server-sent event as it arrives when the worker streams, otherwise the
// whole body, read within c (ReadBody: a longer body is a
// *TooLargeError) and drawn from ctx's account. It closes the
// response body, before its end on an error, which closes the leg's
// connection.
func Relay(ctx context.Context, resp *http.Response, sink legs.Sink, c legs.Cap) error {
	defer resp.Body.Close()
	sink.Header(resp.Header)
	ct := resp.Header.Get("Content-Type")
	if media, _, _ := mime.ParseMediaType(ct); media == "text/event-stream" {
		return relayEvents(resp.Body, sink)
	}
	body, err := legs.ReadBody(ctx, resp, c)
	var tooLarge *legs.TooLargeError
	if errors.As(err, &tooLarge) {
		return err
	}
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	return sink.Response(resp.StatusCode, ct, body)
}

// batches recycles the relay's batches across requests.
var batches = sync.Pool{New: func() any { return &batch{} }}

// relayEvents reads a text/event-stream and hands the events' data to the
// sink in batches: a batch goes out as soon as no further complete line is
// already buffered, so events that arrived together travel on together and
// none waits for the next read. Each event's type (its "event:" field, the
// Responses and Messages streams name every event) goes with its data;
// comments and the other fields are dropped; a multi-line data field is
// joined with "\n" as the SSE spec says. An event with a type but no data
// is not dispatched (SSE spec).
func relayEvents(r io.Reader, sink legs.Sink) error {
	e := eventRelay{lines: newLineReader(r)}
	defer e.release()
	return e.run(sink)
}

// eventRelay is relayEvents' state: the line reader and the batch being
// filled, nil while empty, so a stream waiting on its worker holds
// neither a buffer nor a batch.
type eventRelay struct {
	lines lineReader
	batch *batch
}

func (e *eventRelay) release() {
	e.lines.release()
	e.dropBatch()
}

// dropBatch hands the batch back to its pool.
func (e *eventRelay) dropBatch() {
	e.batch.recycle()
	e.batch = nil
}

func (e *eventRelay) run(sink legs.Sink) error {
	for {
		line, err := e.lines.readLine()
		if e.batch == nil {
			e.batch = batches.Get().(*batch)
		}
		b := e.batch
		if err != nil {
			b.end() // a last event without its blank line
			if flushErr := b.flush(sink); flushErr != nil {
				return flushErr
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read event stream: %w", err)
		}
		if len(line) == 0 { // blank line: dispatch
			b.end()
			if !e.lines.lineBuffered() { // the next read may wait: flush, and hold no batch meanwhile
				err := b.flush(sink)
				e.dropBatch()
				if err != nil {
					return err
				}
			}
			continue
		}
		if name, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			if err := b.setName(bytes.TrimPrefix(name, []byte(" "))); err != nil {
				return fmt.Errorf("read event stream: %w", err)
			}
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			if string(line) != "data" {
				continue
			}
			value = nil // "data" alone is an empty data line (SSE spec)
		}
		if err := b.add(bytes.TrimPrefix(value, []byte(" "))); err != nil {
			return fmt.Errorf("read event stream: %w", err)
		}
	}
}

// batch holds the data of the events read since the last flush, back to
// back in one buffer.
type batch struct {
	buf    []byte
	ends   []int // where each complete event's data ends in buf
	open   bool  // an event has data lines but no blank line yet
	start  int   // where the open event starts
	events [][]byte
	// names are the complete events' types, parallel to ends; name is the
	// open event's; named: some complete event of the batch has one.
	names []string
	name  string
	named bool
	last  string // the last type read, by this stream or an earlier one (the batch is pooled)
}

// maxNameSize bounds an event's type.
const maxNameSize = 256

// setName sets the type of the event being read (the last "event:" field
// of an event wins, as the SSE spec says). A type travels as a proto
// string: it must be UTF-8.
func (b *batch) setName(name []byte) error {
	if len(name) > maxNameSize || !utf8.Valid(name) {
		return fmt.Errorf("event type not UTF-8 or longer than %d bytes", maxNameSize)
	}
	if string(name) != b.last { // the previous event's type again costs no allocation
		b.last = string(name)
	}
	b.name = b.last
	return nil
}

// add appends one data line to the open event.
func (b *batch) add(value []byte) error {
	if b.open {
		b.buf = append(b.buf, '\n')
	} else {
		b.open, b.start = true, len(b.buf)
	}
	if len(b.buf)-b.start+len(value) > maxEventSize {
		return fmt.Errorf("event larger than %d bytes", maxEventSize)
	}
	b.buf = append(b.buf, value...)
	return nil
}

// end completes the open event, if any.
func (b *batch) end() {
	if b.open {
		b.ends = append(b.ends, len(b.buf))
		b.names = append(b.names, b.name)
		b.named = b.named || b.name != ""
		b.open = false
	}
	b.name = ""
}

// recycle empties b and hands it back to the pool; a nil b is left alone.
func (b *batch) recycle() {
	if b == nil {
		return
	}
	b.buf, b.ends, b.open = b.buf[:0], b.ends[:0], false
	b.names, b.name, b.named = b.names[:0], "", false
	if cap(b.buf) <= 1<<20 { // do not keep one huge event's buffer
		batches.Put(b)
	}
}

// flush hands the complete events to the sink and empties the batch.
func (b *batch) flush(sink legs.Sink) error {
	if len(b.ends) == 0 {
		return nil
	}
	b.events = b.events[:0]
	start := 0
	for _, end := range b.ends {
		b.events = append(b.events, b.buf[start:end:end])
		start = end
	}
	var names []string
	if b.named {
		names = b.names
	}
	err := sink.Events(b.events, names)
	b.buf, b.ends, b.names, b.named = b.buf[:0], b.ends[:0], b.names[:0], false
	return err
}
