package steps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// maxEventSize bounds one server-sent event from a worker.
const maxEventSize = 16 << 20

// relay passes a worker's 2xx answer to the sink: each server-sent event as
// it arrives when the worker streams, otherwise the whole body. It closes
// the response body.
func relay(resp *http.Response, sink Sink) error {
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if media, _, _ := mime.ParseMediaType(ct); media == "text/event-stream" {
		return relayEvents(resp.Body, sink)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	return sink.Response(resp.StatusCode, ct, body)
}

// relayEvents reads a text/event-stream and hands each event's data to the
// sink, flushing whenever no further complete line is already buffered:
// events that arrived together travel on together, and none waits for the
// next read. Comments and fields other than data are dropped; a multi-line
// data field is joined with "\n" as the SSE spec says.
func relayEvents(r io.Reader, sink Sink) error {
	br := bufio.NewReaderSize(r, 32<<10)
	var data []byte
	hasData := false
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if hasData {
					if err := sink.Event(data); err != nil {
						return err
					}
				}
				return sink.Flush()
			}
			if flushErr := sink.Flush(); flushErr != nil {
				return flushErr
			}
			return fmt.Errorf("read event stream: %w", err)
		}
		if len(line) == 0 { // blank line: dispatch
			if hasData {
				if err := sink.Event(data); err != nil {
					return err
				}
				if !lineBuffered(br) {
					if err := sink.Flush(); err != nil {
						return err
					}
				}
			}
			data, hasData = data[:0], false
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if hasData {
			data = append(data, '\n')
		}
		if len(data)+len(value) > maxEventSize {
			return fmt.Errorf("read event stream: event larger than %d bytes", maxEventSize)
		}
		data = append(data, value...)
		hasData = true
	}
}

// lineBuffered reports whether a complete line is already in br's buffer,
// so reading it will not block.
func lineBuffered(br *bufio.Reader) bool {
	buffered, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(buffered, '\n') >= 0
}

// readLine returns one line without its line ending (LF or CRLF). The slice
// is valid until the next call.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(long) > maxEventSize {
				return nil, fmt.Errorf("line longer than %d bytes", maxEventSize)
			}
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}
