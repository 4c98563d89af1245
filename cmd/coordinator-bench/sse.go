package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// doneData is the data of the event that ends an OpenAI stream.
var doneData = []byte("[DONE]")

// countEvents reads server-sent events from r until the data: [DONE] event
// has been dispatched or r ends. It returns the number of events dispatched
// (an event is a run of lines holding at least one data: field, ended by a
// blank line; comments and other fields do not make an event) and whether
// the last one was [DONE]. It reads nothing past the [DONE] event, so the
// caller can check that nothing follows it.
func countEvents(r *bufio.Reader) (events int, done bool, err error) {
	hasData, isDone := false, false
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				// An event not ended by a blank line is never dispatched.
				return events, false, nil
			}
			return events, false, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if hasData {
				events++
				if isDone {
					return events, true, nil
				}
			}
			hasData, isDone = false, false
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		// [DONE] must be the event's only data line.
		isDone = !hasData && bytes.Equal(data, doneData)
		hasData = true
	}
}

// readLine reads one line, ended by "\n" (or the last line if r ends). Of a
// line longer than r's buffer it returns the start and skips the rest: an
// event's kind is in the start of its lines.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = nil
		}
		return line, err
	}
	start := bytes.Clone(line[:min(len(line), 64)])
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = r.ReadSlice('\n')
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return start, err
}
