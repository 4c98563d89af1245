package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// server is an httptest server on loopback that counts the connections it
// opened and closed.
type server struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func postH1(t *testing.T, tr http.RoundTripper, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

func TestWritesTheBytesNetHTTPWrites(t *testing.T) {
	for _, tt := range []struct {
		name string
		body func() io.Reader
		size int64
	}{
		{name: "known length", body: func() io.Reader { return strings.NewReader(`{"model":"m"}`) }, size: 13},
		{name: "parts", body: func() io.Reader { b := net.Buffers{[]byte(`{"a":`), []byte(`1}`)}; return &b }, size: 7},
		{name: "stream, chunked", body: func() io.Reader { return io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")) }, size: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0") // one address for both: the Host header
			require.NoError(t, err)
			defer ln.Close()
			send := func(tr http.RoundTripper) []byte {
				wire := make(chan []byte, 1)
				go func() {
					c, err := ln.Accept()
					if err != nil {
						wire <- nil
						return
					}
					defer c.Close()
					var read bytes.Buffer // all the server read: the request, once its body was read
					req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(c, &read)))
					if err == nil {
						_, _ = io.Copy(io.Discard, req.Body)
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					wire <- read.Bytes()
				}()
				req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", tt.body())
				require.NoError(t, err)
				req.ContentLength = tt.size
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Epp-Profile", "decode")
				req.Header["X-Request-Id"] = []string{"r-1"}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				assert.Equal(t, "ok", readAll(t, resp))
				return <-wire
			}
			ref := send(&http.Transport{DisableCompression: true})
			got := send(&gateway.HTTP1Transport{})
			assert.Equal(t, string(ref), string(got))
			assert.Contains(t, string(got), "POST /v1/chat/completions HTTP/1.1\r\n")
		})
	}
}

func TestKeepsTheConnectionForTheNextRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	for i := range 5 {
		resp, err := postH1(t, tr, context.Background(), s.URL, strings.Repeat("x", i))
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("x", i), readAll(t, resp))
	}
	assert.Equal(t, int32(1), s.opened.Load(), "one connection for five requests in turn")
}

func TestABodyClosedBeforeItsEndClosesItsConnection(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("y", 64<<10))
	})
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	resp, err := postH1(t, tr, context.Background(), s.URL, "")
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(make([]byte, 1))
	assert.Error(t, err, "a closed body reads no more")

	resp, err = postH1(t, tr, context.Background(), s.URL, "")
	require.NoError(t, err)
	assert.Len(t, readAll(t, resp), 64<<10)
	assert.Equal(t, int32(2), s.opened.Load(), "the rest of the first answer was not read: its connection is not reused")
	assert.Eventually(t, func() bool { return s.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
}

func TestAnAnswerAskingToCloseIsNotKept(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	tr := &gateway.HTTP1Transport{}
	for range 2 {
		resp, err := postH1(t, tr, context.Background(), s.URL, "")
		require.NoError(t, err)
		assert.Equal(t, "bye", readAll(t, resp))
	}
	assert.Equal(t, int32(2), s.opened.Load())
}

func TestStreamsTheBodyAsItComes(t *testing.T) {
	next := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-next
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	resp, err := postH1(t, tr, context.Background(), s.URL, "{}")
	require.NoError(t, err)
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: 1\n", line, "the first event, before the server sent the second")
	close(next)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "\ndata: [DONE]\n\n", string(rest))
	require.NoError(t, resp.Body.Close())

	resp, err = postH1(t, tr, context.Background(), s.URL+"/again", "{}")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int32(1), s.opened.Load(), "a chunked answer read to its end leaves its connection reusable")
}

func TestKeepsNoGoroutineOfItsOwn(t *testing.T) {
	for _, tt := range []struct {
		name string
		tr   http.RoundTripper
		want int
	}{
		{name: "h1", tr: &gateway.HTTP1Transport{}, want: 0},
		{name: "net/http, for contrast", tr: &http.Transport{}, want: 2}, // its read and write loops
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "first")
				w.(http.Flusher).Flush()
				<-release
			})
			resp, err := postH1(t, tt.tr, context.Background(), s.URL, "")
			require.NoError(t, err)
			_, err = io.ReadFull(resp.Body, make([]byte, 5))
			require.NoError(t, err)
			assert.Equal(t, tt.want, transportGoroutines(), "goroutines of the transport while an answer is open")
			close(release)
			_, err = io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			tt.tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		})
	}
}

// transportGoroutines counts the goroutines running code of either
// transport: the HTTP/1.1 transport's connections and bodies, net/http's
// persistent connections.
func transportGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "/internal/gateway.(*HTTP1Transport)") || strings.Contains(g, "/internal/gateway.(*conn)") ||
			strings.Contains(g, "/internal/gateway.(*body)") || strings.Contains(g, "net/http.(*persistConn)") {
			n++
		}
	}
	return n
}

func TestTheContextEndsTheRoundTripAndTheBody(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			_, _ = io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	cause := errors.New("the leg was abandoned")

	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	_, err := postH1(t, tr, ctx, s.URL+"/hang", "")
	assert.ErrorIs(t, err, cause, "waiting for the header")

	ctx, cancel = context.WithCancelCause(context.Background())
	resp, err := postH1(t, tr, ctx, s.URL+"/stream", "")
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 5))
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	_, err = resp.Body.Read(make([]byte, 10))
	assert.ErrorIs(t, err, cause, "waiting for the body")
	resp.Body.Close()
	assert.Eventually(t, func() bool { return s.closed.Load() == 2 }, 5*time.Second, 5*time.Millisecond,
		"both connections are closed, so the server's requests end")
}

func TestResponseHeaderTimeoutIsATimeoutAndSparesTheBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-header" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(150 * time.Millisecond) // longer than the header timeout, in the body
		_, _ = io.WriteString(w, "late")
	})
	tr := &gateway.HTTP1Transport{ResponseHeaderTimeout: 50 * time.Millisecond}
	defer tr.CloseIdleConnections()
	_, err := postH1(t, tr, context.Background(), s.URL+"/slow-header", "")
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())

	resp, err := postH1(t, tr, context.Background(), s.URL+"/slow-body", "")
	require.NoError(t, err)
	assert.Equal(t, "late", readAll(t, resp))
}

func TestAKeptConnectionTheServerClosedIsNotUsed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	closedFirst := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			if req, err := http.ReadRequest(br); err == nil {
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
			_ = c.Close() // as a server's idle timeout would, without saying so
			if i == 0 {
				close(closedFirst)
			}
		}
	}()
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	url := "http://" + ln.Addr().String()
	resp, err := postH1(t, tr, context.Background(), url, "{}")
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp))
	<-closedFirst
	time.Sleep(10 * time.Millisecond) // the server's FIN reaches the client's socket
	resp, err = postH1(t, tr, context.Background(), url, "{}")
	require.NoError(t, err, "the closed connection was seen before it was used")
	assert.Equal(t, "ok", readAll(t, resp))
}

func TestKeepsAtMostMaxIdleConnsPerHostAndClosesIdleOnes(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		started.Done()
		<-release
	})
	tr := &gateway.HTTP1Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 100 * time.Millisecond}
	started.Add(4)
	resps := make([]*http.Response, 4)
	for i := range resps {
		var err error
		resps[i], err = postH1(t, tr, context.Background(), s.URL, "")
		require.NoError(t, err)
	}
	started.Wait()
	close(release)
	for _, resp := range resps {
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	assert.Eventually(t, func() bool { return s.closed.Load() == 2 }, 5*time.Second, 5*time.Millisecond, "two kept, two closed")
	assert.Eventually(t, func() bool { return s.closed.Load() == 4 }, 5*time.Second, 5*time.Millisecond, "the kept ones close once idle 100ms")
}

func TestAnswersPastTheHeaderLimitFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = http.ReadRequest(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("f", 1000) + "\r\n"
		for range 2000 { // 2 MB of header, never ended
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	tr := &gateway.HTTP1Transport{}
	_, err = postH1(t, tr, context.Background(), "http://"+ln.Addr().String(), "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than 1 MiB")
}

func TestSkipsInformationalAnswers(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "final")
	})
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	resp, err := postH1(t, tr, context.Background(), s.URL, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "final", readAll(t, resp))
}

func TestAFailingRequestBodyFailsWithItsOwnError(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) })
	tr := &gateway.HTTP1Transport{}
	defer tr.CloseIdleConnections()
	tooLarge := &http.MaxBytesError{Limit: 3}
	body := io.MultiReader(strings.NewReader("abc"), errReader{tooLarge})
	req, err := http.NewRequest(http.MethodPost, s.URL, body)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := tr.RoundTrip(req); done <- err }()
	select {
	case err := <-done:
		var mbe *http.MaxBytesError
		assert.ErrorAs(t, err, &mbe, "the body's error, not a wait for an answer the server cannot give")
	case <-time.After(10 * time.Second):
		t.Fatal("the round trip waited for the answer to a request cut short")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestRefusesWhatItDoesNotDo(t *testing.T) {
	tr := &gateway.HTTP1Transport{}
	for _, url := range []string{"https://127.0.0.1:1/", "ftp://127.0.0.1/"} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		assert.ErrorContains(t, err, "unsupported protocol scheme")
	}
}

// countingConn is a TCP connection that counts its plain writes; its
// writev (net.Buffers) goes past Write, straight to the socket.
type countingConn struct {
	*net.TCPConn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.TCPConn.Write(p)
}

// countingTransport is a Transport whose connections count their plain
// writes in writes.
func countingTransport(writes *atomic.Int32) *gateway.HTTP1Transport {
	return &gateway.HTTP1Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{TCPConn: c.(*net.TCPConn), writes: writes}, nil
	}}
}

func TestALargeBodyGoesInLargeWrites(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	var writes atomic.Int32
	tr := countingTransport(&writes)
	defer tr.CloseIdleConnections()
	body := bytes.Repeat([]byte("i"), 1<<20)
	req, err := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "1048576", readAll(t, resp))
	assert.LessOrEqual(t, writes.Load(), int32(1+(1<<20)/(32<<10)+1), "1 MiB in 32 KiB writes, not 4 KiB ones")
}

func TestAContextEndingWhileTheRequestIsWrittenIsNotOverriddenByTheHeaderTimeout(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server watches for the client's close
		<-r.Context().Done()
	})
	cause := errors.New("the client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	tr := &gateway.HTTP1Transport{
		ResponseHeaderTimeout: 30 * time.Second, // far past the test's wait
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			return &abortedWhileWriting{Conn: c, cancel: func() { cancel(cause) }, aborted: make(chan struct{})}, err
		},
	}
	defer tr.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		_, err := postH1(t, tr, ctx, s.URL, "body")
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, cause)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the round trip waited for the header timeout instead of ending with its context")
	}
}

// abortedWhileWriting is a connection whose request's context ends during
// the request's write: the write returns once the transport's abort set
// the connection's deadline.
type abortedWhileWriting struct {
	net.Conn
	cancel        func()
	once, onAbort sync.Once
	aborted       chan struct{}
}

func (c *abortedWhileWriting) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.once.Do(func() {
		c.cancel()
		<-c.aborted
	})
	return n, err
}

func (c *abortedWhileWriting) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	if t.Before(time.Now()) {
		c.onAbort.Do(func() { close(c.aborted) })
	}
	return err
}

// TestABodyOfBuffersGoesWithItsHeaderInOneWritev: net/http's writer
// flushes the header on its own before a body of net.Buffers (upstream's
// legs); h1 holds it back and sends it with the body's pieces in one
// writev, not in plain writes.
func TestABodyOfBuffersGoesWithItsHeaderInOneWritev(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	var writes atomic.Int32
	tr := countingTransport(&writes)
	defer tr.CloseIdleConnections()
	for _, parts := range [][][]byte{
		{[]byte(`{"model":"m",`), []byte(`"max_tokens":1,`), []byte(`"prompt":"hi"}`)},
		{bytes.Repeat([]byte("i"), 100<<10), []byte("j")},
	} {
		bufs := net.Buffers(parts)
		var want []byte
		for _, p := range parts {
			want = append(want, p...)
		}
		req, err := http.NewRequest(http.MethodPost, s.URL, io.NopCloser(&bufs))
		require.NoError(t, err)
		req.ContentLength = int64(len(want))
		req.GetBody = func() (io.ReadCloser, error) { b := net.Buffers(parts); return io.NopCloser(&b), nil }
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, string(want), readAll(t, resp))
	}
	assert.Zero(t, writes.Load(), "header and body in one writev each, no plain write")
}
