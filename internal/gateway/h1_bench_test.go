package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// cannedServer answers every request on its connections with answer. It
// reads a request as a leg is sent (a header with a Content-Length, then
// that many bytes) and allocates nothing a request, so that a benchmark's
// allocations are the client's.
func cannedServer(b *testing.B, answer []byte) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveCanned(c, answer)
		}
	}()
	return "http://" + ln.Addr().String()
}

func serveCanned(c net.Conn, answer []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	prefix := []byte("Content-Length: ")
	for {
		length := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if bytes.HasPrefix(line, prefix) {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(prefix):])))
			}
			if len(line) <= 2 { // the blank line ending the header
				break
			}
		}
		if _, err := br.Discard(length); err != nil {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// BenchmarkRoundTrip is one leg as upstream sends it (a JSON body in
// pieces, a few headers) and its answer read to the end, on a kept
// connection: its allocations are the transport's cost a leg.
func BenchmarkRoundTrip(b *testing.B) {
	url := cannedServer(b, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"))
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	parts := [][]byte{[]byte(`{"model":"m",`), []byte(`"max_tokens":1,`), []byte(`"prompt":"hi"}`)}
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/completions", nil)
		if err != nil {
			b.Fatal(err)
		}
		bufs := net.Buffers(parts)
		req.Body, req.ContentLength = io.NopCloser(&bufs), 42
		req.GetBody = func() (io.ReadCloser, error) { b := net.Buffers(parts); return io.NopCloser(&b), nil }
		req.Header["Content-Type"] = []string{"application/json"}
		req.Header["X-Request-Id"] = []string{"r-1"}
		req.Header["Epp-Profile"] = []string{"decode"}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		_ = resp.Body.Close()
	}
}
