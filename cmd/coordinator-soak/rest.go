package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"
)

// restClient sends the REST kinds over HTTP/1.1 keep-alive connections.
type restClient struct {
	http *http.Client
	base string
}

func newRESTClient(base string, conns int) *restClient {
	return &restClient{
		base: base,
		http: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}},
	}
}

// maxAnswer bounds what the soak reads of a non-streamed answer.
const maxAnswer = 1 << 20

// do sends one request; ctx's cause tells a deliberate disconnect
// (errDisconnect) and the client timeout (errClientTimeout) apart from a
// failure. For a disconnecting stream, disconnect is called after the
// first event.
func (c *restClient) do(ctx context.Context, k *kind, f *fault, body []byte, disconnect func()) observation {
	var o observation
	var first time.Time
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Now() }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.base+k.path, bytes.NewReader(body))
	if err != nil {
		o.transport = err
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	if f != nil {
		req.Header.Set(simFaultHeader, f.header)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return ended(ctx, o, err)
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	stream := resp.StatusCode == http.StatusOK && k.stream
	if stream {
		err = readEvents(resp.Body, &o, disconnect)
	} else {
		err = readAnswer(resp, &o)
	}
	if !first.IsZero() {
		o.ttfb = first.Sub(start)
	}
	o.total = time.Since(start)
	switch {
	case err == nil:
	case stream && context.Cause(ctx) == nil:
		o.cut = err // a truncated stream, told by neither done nor errorEvent
	default:
		return ended(ctx, o, err)
	}
	return o
}

// ended records why a request ended on err: the client's own cancellation
// or timeout, else a transport failure.
func ended(ctx context.Context, o observation, err error) observation {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errDisconnect):
		o.cancelled = true
	case errors.Is(cause, errClientTimeout):
		o.timedOut = true
	default:
		o.transport = err
	}
	return o
}

// readAnswer reads a whole answer: a completion for 200, else an error
// object.
func readAnswer(resp *http.Response, o *observation) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		o.content = checkCompletion(body)
	} else {
		o.content = checkErrorBody(resp.StatusCode, body)
	}
	return nil
}

// readEvents reads a server-sent event stream to its end: chunk events,
// then data: [DONE] or an error event, then nothing. It calls disconnect
// (when not nil) after the first chunk. A stream cut short has neither
// done nor errorEvent set, and the read error returned.
func readEvents(r io.Reader, o *observation, disconnect func()) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxAnswer)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		switch {
		case !ok:
			continue // blank separators, comments
		case o.done || o.errorEvent != 0:
			o.content = fmt.Errorf("data after the end of the stream: %s", snippet(data))
		case bytes.Equal(data, []byte("[DONE]")):
			o.done = true
			if o.chunks != streamChunks && o.content == nil {
				o.content = errChunkCount
			}
		case bytes.HasPrefix(data, []byte(`{"error"`)):
			code, err := errorCode(data)
			if err != nil {
				o.content = err
			}
			o.errorEvent = max(code, 1)
		default:
			if err := checkChunk(data); err != nil && o.content == nil {
				o.content = err
			}
			o.chunks++
			if o.chunks == 1 && disconnect != nil {
				disconnect()
			}
		}
	}
	if err := sc.Err(); err != nil && !o.done && o.errorEvent == 0 {
		return err
	}
	return nil
}
