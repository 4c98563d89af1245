package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// outcome is what a caller sees of one round trip and its body.
type outcome struct {
	Err     bool
	Status  int
	Header  http.Header
	Body    string
	BodyErr bool
}

// pipeDialer connects each dial to a server that reads one request, writes
// answer as it is and hangs up.
func pipeDialer(answer []byte) func(context.Context, string, string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			req, err := http.ReadRequest(bufio.NewReader(server))
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = server.Write(answer)
		}()
		return client, nil
	}
}

func roundTrip(tr http.RoundTripper) outcome {
	req, _ := http.NewRequest(http.MethodPost, "http://gateway.test/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return outcome{Err: true}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return outcome{Status: resp.StatusCode, Header: resp.Header, Body: string(body), BodyErr: err != nil}
}

// FuzzAnswersReadAsNetHTTPReadsThem holds h1 to net/http's transport on
// whatever a gateway answers: the same status, header and body, or a
// failure where it fails (but 101, which h1 refuses). Neither may hang or
// panic.
func FuzzAnswersReadAsNetHTTPReadsThem(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"garbage\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		want := roundTrip(&http.Transport{DialContext: pipeDialer(answer), DisableCompression: true})
		got := roundTrip(&gateway.HTTP1Transport{DialContext: pipeDialer(answer)})
		if want.Status == http.StatusSwitchingProtocols {
			assert.True(t, got.Err, "h1 refuses 101")
			return
		}
		assert.Equal(t, want, got)
	})
}
