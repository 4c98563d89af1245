package main

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountEvents(t *testing.T) {
	t.Parallel()
	long := "data: " + strings.Repeat("x", 100) + "\n\n"
	tests := []struct {
		name   string
		stream string
		events int
		done   bool
		rest   string // what countEvents leaves unread
	}{
		{name: "empty", stream: "", events: 0},
		{name: "done only", stream: "data: [DONE]\n\n", events: 1, done: true},
		{name: "events then done", stream: "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", events: 3, done: true},
		{name: "CRLF lines", stream: "data: {}\r\n\r\ndata: [DONE]\r\n\r\n", events: 2, done: true},
		{name: "no space after colon", stream: "data:{}\n\ndata:[DONE]\n\n", events: 2, done: true},
		{name: "no done", stream: "data: {}\n\ndata: {}\n\n", events: 2},
		{name: "done not dispatched without blank line", stream: "data: {}\n\ndata: [DONE]\n", events: 1},
		{name: "done without final newline", stream: "data: {}\n\ndata: [DONE]", events: 1},
		{name: "comments and other fields are not events", stream: ": keep-alive\n\nevent: ping\nid: 1\n\ndata: [DONE]\n\n", events: 1, done: true},
		{name: "multi-line data is one event", stream: "data: a\ndata: b\n\ndata: [DONE]\n\n", events: 2, done: true},
		{name: "done as a second data line is not done", stream: "data: a\ndata: [DONE]\n\n", events: 1},
		{name: "extra blank lines", stream: "\n\ndata: {}\n\n\n\ndata: [DONE]\n\n", events: 2, done: true},
		{name: "stops at done", stream: "data: [DONE]\n\ndata: {}\n\n", events: 1, done: true, rest: "data: {}\n\n"},
		{name: "lines longer than the buffer", stream: long + long + "data: [DONE]\n\n", events: 3, done: true},
		{name: "long line without newline at the end", stream: "data: {}\n\n" + strings.TrimSuffix(long, "\n\n"), events: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := bufio.NewReaderSize(strings.NewReader(tt.stream), 16)
			events, done, err := countEvents(r)
			require.NoError(t, err)
			assert.Equal(t, tt.events, events, "events")
			assert.Equal(t, tt.done, done, "done")
			rest, err := io.ReadAll(r)
			require.NoError(t, err)
			assert.Equal(t, tt.rest, string(rest), "unread")
		})
	}
}
