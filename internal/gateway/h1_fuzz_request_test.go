package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// received is what a server parsed of a request; Unparsable when it could
// not.
type received struct {
	Unparsable                      bool
	Method, RequestURI, Proto, Host string
	Header, Trailer                 http.Header
	ContentLength                   int64
	TransferEncoding                []string
	Close                           bool
	Body                            string
	BodyErr                         bool
}

// sent is what one transport made of a request: a failure (Err), and what
// the server parsed of it, nil when nothing was sent (refused).
type sent struct {
	Err      bool
	Received *received
}

// recordingDialer connects each dial to a server that parses one request,
// passes it to got, answers it and hangs up.
func recordingDialer(got chan<- *received) func(context.Context, string, string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			br := bufio.NewReader(server)
			req, err := http.ReadRequest(br)
			if err != nil {
				got <- &received{Unparsable: true}
				return
			}
			body, err := io.ReadAll(req.Body)
			// What follows the request the server took (a CONNECT's body)
			// is read, or the client's write of it and the answer's would
			// wait on each other (a pipe has no buffer).
			go func() { _, _ = io.Copy(io.Discard, br) }()
			got <- &received{Method: req.Method, RequestURI: req.RequestURI, Proto: req.Proto, Host: req.Host,
				Header: req.Header, Trailer: req.Trailer, ContentLength: req.ContentLength,
				TransferEncoding: req.TransferEncoding, Close: req.Close, Body: string(body), BodyErr: err != nil}
			_, _ = io.WriteString(server, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}()
		return client, nil
	}
}

// fuzzRequest is the request of the fuzz's inputs: header holds a field a
// line, its name before the first colon, as they are (not canonical, maybe
// not valid); a chunked body has no length.
func fuzzRequest(method, target string, header, body []byte, chunked bool) (*http.Request, bool) {
	req, err := http.NewRequest(http.MethodPost, "http://gateway.test"+target, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.Method = method
	for line := range strings.SplitSeq(string(header), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok {
			req.Header[name] = append(req.Header[name], value)
		}
	}
	if chunked {
		req.Body, req.ContentLength, req.GetBody = io.NopCloser(bytes.NewReader(body)), -1, nil
	}
	return req, true
}

func send(tr http.RoundTripper, req *http.Request, got chan *received) sent {
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	out := sent{Err: err != nil}
	select {
	case out.Received = <-got:
	default: // nothing dialed
	}
	return out
}

// FuzzRequestsWrittenAsNetHTTPWritesThem holds h1 to net/http's transport
// on whatever a leg asks to send: the request a server parses of h1's
// bytes is the one it parses of net/http's (method, target, header set,
// framing, body), or both refuse it. Neither may hang or panic.
func FuzzRequestsWrittenAsNetHTTPWritesThem(f *testing.F) {
	type seed struct {
		method, target, header, body string
		chunked                      bool
	}
	for _, s := range []seed{
		{"POST", "/v1/chat/completions", "Content-Type:application/json\nX-Request-Id:r-1\nEpp-Profile:decode", `{"model":"m"}`, false},
		{"POST", "/v1/completions", "authorization:Bearer t\nx-custom:v", `{"prompt":"hi"}`, true},
		{"GET", "/v1/models?x=1", "Accept:*/*", "", false},
		{"", "/", "", "", false},
		{"POST", "/", "X-A:a\x00b", "{}", false},
		{"POST", "/", "X-A:a\r\nX-B: c", "{}", false},
		{"POST", "/", "X A:v", "{}", false},
		{"POST", "/", ":v", "{}", false},
		{"PO ST", "/", "", "{}", false},
		{"POST", "/", "Transfer-Encoding:chunked\nContent-Length:5\nHost:evil", "{}", false},
		{"POST", "/", "Connection:close\nIdempotency-Key:k", "{}", false},
		{"POST", "/", "X-Obs:caf\xc3\xa9\tok", "{}", false},
		{"CONNECT", "/", "", "", false},
		{"HEAD", "/%2F?q=%00", "", "", false},
	} {
		f.Add(s.method, s.target, []byte(s.header), []byte(s.body), s.chunked)
	}
	f.Fuzz(func(t *testing.T, method, target string, header, body []byte, chunked bool) {
		results := make([]sent, 2)
		for i, newTransport := range []func(func(context.Context, string, string) (net.Conn, error)) http.RoundTripper{
			func(d func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
				return &http.Transport{DialContext: d, DisableCompression: true}
			},
			func(d func(context.Context, string, string) (net.Conn, error)) http.RoundTripper {
				return &gateway.HTTP1Transport{DialContext: d}
			},
		} {
			req, ok := fuzzRequest(method, target, header, body, chunked)
			if !ok {
				return
			}
			got := make(chan *received, 1)
			tr := newTransport(recordingDialer(got))
			results[i] = send(tr, req, got)
			tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		}
		assert.Equal(t, results[0], results[1], "net/http's, then h1's")
	})
}
