package pd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

var testCap = legs.Cap{Leg: "decode", Max: 1 << 20, Key: "gateway.max_answer_size"}

func response(contentType, body string) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{contentType}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

func TestRelayEvents(t *testing.T) {
	t.Parallel()
	// names: each event's type ("" for none), when the case is about them.
	tests := []struct {
		name  string
		body  string
		want  []string
		names []string
	}{
		{name: "openai chunks and done", body: "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", want: []string{`{"a":1}`, `{"a":2}`, "[DONE]"}},
		{name: "crlf line endings", body: "data: x\r\n\r\ndata: y\r\n\r\n", want: []string{"x", "y"}},
		{name: "no space after colon", body: "data:x\n\n", want: []string{"x"}},
		{name: "multi-line data joined", body: "data: a\ndata: b\n\n", want: []string{"a\nb"}},
		{name: "comments and other fields dropped", body: ": ping\nid: 7\nretry: 5\ndata: x\n\n", want: []string{"x"}},
		{name: "last event without blank line", body: "data: x\n\ndata: tail", want: []string{"x", "tail"}},
		{name: "empty stream", body: "", want: []string{}},
		{name: "long event beyond the read buffer", body: "data: " + strings.Repeat("z", 100<<10) + "\n\n", want: []string{strings.Repeat("z", 100<<10)}},
		// Typed events (the Responses and Messages streams) keep their types.
		{name: "typed events", body: "event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\nevent: message_stop\ndata: {\"b\":2}\n\n",
			want: []string{`{"a":1}`, `{}`, `{"b":2}`}, names: []string{"message_start", "ping", "message_stop"}},
		{name: "typed, no space, crlf", body: "event:response.created\r\ndata:{}\r\n\r\n", want: []string{`{}`}, names: []string{"response.created"}},
		{name: "typed and untyped", body: "data: x\n\nevent: e\ndata: y\n\n", want: []string{"x", "y"}, names: []string{"", "e"}},
		{name: "last type wins", body: "event: a\nevent: b\ndata: x\n\n", want: []string{"x"}, names: []string{"b"}},
		{name: "a type without data is not dispatched", body: "event: a\n\ndata: x\n\n", want: []string{"x"}, names: []string{""}},
		{name: "untyped", body: "data: x\n\n", want: []string{"x"}, names: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sink := &steptest.Sink{}
			require.NoError(t, Relay(context.Background(), response("text/event-stream; charset=utf-8", tt.body), sink, testCap))
			assert.Equal(t, tt.want, sink.EventStrings())
			if tt.names != nil {
				assert.Equal(t, tt.names, sink.Names)
			}
			assert.Zero(t, sink.Status, "a stream is not a whole response")
		})
	}
}

func TestRelayRefusesABadEventType(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"\xff", strings.Repeat("a", maxNameSize+1)} {
		err := Relay(context.Background(), response("text/event-stream", "event: "+name+"\ndata: x\n\n"), &steptest.Sink{}, testCap)
		assert.ErrorContains(t, err, "event type not UTF-8 or longer than")
	}
}

func TestRelayJSONPassesBytesThrough(t *testing.T) {
	t.Parallel()
	sink := &steptest.Sink{}
	body := `{"id":"x",  "choices":[]}`
	require.NoError(t, Relay(context.Background(), response("application/json", body), sink, testCap))
	assert.Equal(t, http.StatusOK, sink.Status)
	assert.Equal(t, "application/json", sink.ContentType)
	assert.Equal(t, body, string(sink.Body))
	assert.Empty(t, sink.Received)
}

func TestRelayStopsWhenTheSinkFails(t *testing.T) {
	t.Parallel()
	gone := errors.New("client gone")
	sink := &steptest.Sink{FailAfter: 1, Err: gone}
	err := Relay(context.Background(), response("text/event-stream", "data: 1\n\ndata: 2\n\ndata: 3\n\n"), sink, testCap)
	assert.ErrorIs(t, err, gone)
	assert.Equal(t, []string{"1"}, sink.EventStrings())
}

func TestRelayFlushesWhenNothingMoreIsWaiting(t *testing.T) {
	t.Parallel()
	t.Run("events that arrive together travel together", func(t *testing.T) {
		t.Parallel()
		sink := &steptest.Sink{}
		require.NoError(t, Relay(context.Background(), response("text/event-stream", "data: 1\n\ndata: 2\n\ndata: 3\n\n"), sink, testCap))
		assert.Equal(t, []string{"1", "2", "3"}, sink.EventStrings())
		assert.Equal(t, []int{3}, sink.Batches, "one batch for the events read together")
	})
	t.Run("an event that arrives alone is sent on before the next read", func(t *testing.T) {
		t.Parallel()
		pr, pw := io.Pipe()
		sink := &steptest.Sink{}
		done := make(chan error, 1)
		resp := response("text/event-stream", "")
		resp.Body = pr
		go func() { done <- Relay(context.Background(), resp, sink, testCap) }()
		for i, e := range []string{"a", "b"} {
			_, err := pw.Write([]byte("data: " + e + "\n\n"))
			require.NoError(t, err)
			// The pipe hands over one write per read: the relay must have
			// flushed this event before it reads the next one.
			require.Eventually(t, func() bool { return len(sink.EventStrings()) == i+1 }, 5*time.Second, time.Millisecond)
		}
		require.NoError(t, pw.Close())
		require.NoError(t, <-done)
	})
}

// waitReader hands out one chunk a Read (io.EOF after the last), and
// records each Read's size and whether the relay's lineReader held a
// buffer while it read.
type waitReader struct {
	chunks []string
	lr     *lineReader
	sizes  []int
	held   []bool
	// relay, when set, is the relay reading: batched records whether it
	// held a batch at each read.
	relay   *eventRelay
	batched []bool
}

func (r *waitReader) Read(p []byte) (int, error) {
	r.sizes = append(r.sizes, len(p))
	r.held = append(r.held, r.lr.buf != nil)
	if r.relay != nil {
		r.batched = append(r.batched, r.relay.batch != nil)
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// TestAWaitingStreamHoldsNoBuffer: once every byte read has been taken,
// the relay hands its read buffer back and waits for the worker with a
// one-byte read, then reads what came with that byte into a buffer.
func TestAWaitingStreamHoldsNoBuffer(t *testing.T) {
	t.Parallel()
	r := &waitReader{chunks: []string{"data: a\n\n", "data: b\n", "\n"}}
	lr := newLineReader(r)
	r.lr = &lr
	var got []string
	for {
		line, err := lr.readLine()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(line))
	}
	assert.Equal(t, []string{"data: a", "", "data: b", ""}, got)
	assert.Equal(t, []int{1, lineBufferSize - 1, 1, lineBufferSize - 1, 1, 1}, r.sizes,
		"a wait reads one byte; the rest of the arrival goes to the buffer; a line end alone is a line, read without waiting for more")
	assert.Equal(t, []bool{false, true, false, true, false, false}, r.held, "no buffer is held while the reader waits")
	assert.Nil(t, lr.buf)
}

// TestAWaitingStreamHoldsNoBatch: the relay hands its batch back once it
// flushed, so a stream waiting between events holds none; an event whose
// data lines came without their blank line keeps it.
func TestAWaitingStreamHoldsNoBatch(t *testing.T) {
	t.Parallel()
	r := &waitReader{chunks: []string{"data: a\n\n", "data: b\n", "\n"}}
	e := eventRelay{lines: newLineReader(r)}
	r.lr, r.relay = &e.lines, &e
	sink := &steptest.Sink{}
	require.NoError(t, e.run(sink))
	e.release()
	assert.Equal(t, []string{"a", "b"}, sink.EventStrings())
	assert.Equal(t, []int{1, 1}, sink.Batches)
	assert.Equal(t, []bool{false, false, false, false, true, false}, r.batched,
		"no batch while waiting after a flush; the open event's batch while waiting for its blank line")
}

// stuckReader returns nothing and no error, forever.
type stuckReader struct{ reads int }

func (r *stuckReader) Read([]byte) (int, error) { r.reads++; return 0, nil }

// TestAReaderThatNeverAnswersFailsTheStream: a body whose reads return
// nothing and no error, over and over, fails the relay with
// io.ErrNoProgress (as bufio's reader does) instead of spinning.
func TestAReaderThatNeverAnswersFailsTheStream(t *testing.T) {
	t.Parallel()
	r := &stuckReader{}
	err := relayEvents(r, &steptest.Sink{})
	require.ErrorIs(t, err, io.ErrNoProgress)
	assert.Equal(t, maxEmptyReads, r.reads)
}

// A JSON answer past the cap is refused as soon as its byte past the cap
// arrives, without reading the rest (an endless body here), naming the leg
// and the cap; the body is closed before its end (the connection is not
// reused).
func TestRelayJSONPastTheCap(t *testing.T) {
	t.Parallel()
	body := &endlessBody{}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: body, ContentLength: 1 << 40}
	sink := &steptest.Sink{}
	err := Relay(context.Background(), resp, sink, testCap)
	var tooLarge *legs.TooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, "decode answer larger than 1 MiB (gateway.max_answer_size)", err.Error())
	assert.Nil(t, sink.Body)
	assert.True(t, body.closed)
	assert.LessOrEqual(t, body.read, int64(1<<20+1))
}

// A JSON answer draws its bytes from the request's account: past the
// budget the answer is refused (the client gets 429), never buffered.
func TestRelayJSONDrawsFromTheAccount(t *testing.T) {
	t.Parallel()
	b := membudget.New(256<<10, 0)
	a := b.Open()
	ctx := membudget.WithAccount(context.Background(), a)
	body := strings.Repeat("x", 512<<10)
	err := Relay(ctx, response("application/json", body), &steptest.Sink{}, testCap)
	require.ErrorIs(t, err, membudget.ErrExhausted)
	assert.Zero(t, b.InUse())

	small := `{"id":"x"}`
	sink := &steptest.Sink{}
	require.NoError(t, Relay(ctx, response("application/json", small), sink, testCap))
	assert.Equal(t, small, string(sink.Body))
	assert.Positive(t, a.Held(), "the answer is held until the request ends")
}

// endlessBody is a body that never ends.
type endlessBody struct {
	read   int64
	closed bool
}

func (e *endlessBody) Read(p []byte) (int, error) {
	e.read += int64(len(p))
	return len(p), nil
}

func (e *endlessBody) Close() error {
	e.closed = true
	return nil
}
