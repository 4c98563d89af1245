package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// hangUpServer answers requests on loopback, but hangs up on the request
// hangUp names (its connection, from 0, and its place on that connection,
// from 0) once it has read it whole, without answering: a kept connection
// that dies after the client's liveness peek, as a server's idle timeout
// racing the request does. It records what it read.
type hangUpServer struct {
	url    string
	conns  atomic.Int32
	mu     sync.Mutex
	wire   []string // each request as it came, in order
	hangUp func(conn, nth int) bool
}

func startHangUpServer(t *testing.T, hangUp func(conn, nth int) bool) *hangUpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	s := &hangUpServer{url: "http://" + ln.Addr().String(), hangUp: hangUp}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c, int(s.conns.Add(1)-1))
		}
	}()
	return s
}

func (s *hangUpServer) serve(c net.Conn, conn int) {
	defer c.Close()
	var read strings.Builder
	br := bufio.NewReader(io.TeeReader(c, &read))
	for nth := 0; ; nth++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		s.wire = append(s.wire, read.String()[:read.Len()-br.Buffered()])
		s.mu.Unlock()
		read.Reset()
		if s.hangUp(conn, nth) {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

func (s *hangUpServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.wire...)
}

// leg is a POST with a body that can be had again, as upstream's legs.
func leg(t *testing.T, url string, idempotencyKey bool) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{"prompt":"hi"}`))
	require.NoError(t, err)
	if idempotencyKey {
		req.Header["Idempotency-Key"] = nil // marks the request, sends nothing
	}
	return req
}

func transports() map[string]func() http.RoundTripper {
	return map[string]func() http.RoundTripper{
		"h1":       func() http.RoundTripper { return &gateway.HTTP1Transport{} },
		"net/http": func() http.RoundTripper { return &http.Transport{DisableCompression: true} },
	}
}

// TestAReplayableRequestIsResentOnceWhenAKeptConnectionDies: the server
// reads the second request on its kept connection and hangs up without a
// word. A request that may be sent twice (an idempotent method, or an
// Idempotency-Key entry, nil so not sent) goes once more on a new
// connection and succeeds; a plain POST fails, and so does any request on
// a new connection the server hangs up on: as with net/http's Transport.
func TestAReplayableRequestIsResentOnceWhenAKeptConnectionDies(t *testing.T) {
	secondOnFirst := func(conn, nth int) bool { return conn == 0 && nth == 1 }
	for _, tt := range []struct {
		name     string
		hangUp   func(conn, nth int) bool
		second   func(t *testing.T, url string) *http.Request
		resent   bool
		requests int
	}{
		{name: "POST with Idempotency-Key", hangUp: secondOnFirst, resent: true, requests: 3,
			second: func(t *testing.T, url string) *http.Request { return leg(t, url, true) }},
		{name: "GET", hangUp: secondOnFirst, resent: true, requests: 3,
			second: func(t *testing.T, url string) *http.Request {
				req, err := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
				require.NoError(t, err)
				return req
			}},
		{name: "plain POST", hangUp: secondOnFirst, resent: false, requests: 2,
			second: func(t *testing.T, url string) *http.Request { return leg(t, url, false) }},
		{name: "a new connection", hangUp: func(conn, nth int) bool { return nth == 0 && conn == 1 }, resent: false, requests: 2,
			second: func(t *testing.T, url string) *http.Request { return leg(t, url, true) }},
	} {
		for name, newTransport := range transports() {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				s := startHangUpServer(t, tt.hangUp)
				tr := newTransport()
				defer tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
				first := leg(t, s.url, true)
				if tt.name == "a new connection" {
					first.Close = true // the second request gets a new connection
				}
				resp, err := tr.RoundTrip(first)
				require.NoError(t, err)
				assert.Equal(t, "ok", readAll(t, resp))

				resp, err = tr.RoundTrip(tt.second(t, s.url))
				if tt.resent {
					require.NoError(t, err)
					assert.Equal(t, "ok", readAll(t, resp))
				} else {
					require.Error(t, err)
				}
				got := s.requests()
				require.Len(t, got, tt.requests)
				if tt.resent {
					assert.Equal(t, got[1], got[2], "the same request again")
					assert.Equal(t, int32(2), s.conns.Load(), "on a new connection")
				}
				for _, r := range got {
					assert.NotContains(t, strings.ToLower(r), "idempotency-key", "the key's nil entry is not sent")
				}
			})
		}
	}
}

// failingConn is a connection whose writes fail, before writing anything,
// once fail is set.
type failingConn struct {
	net.Conn
	fail *atomic.Bool
}

func (c failingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, syscall.EPIPE
	}
	return c.Conn.Write(p)
}

// TestARequestNothingOfWhichWentOutIsResent: on a kept connection whose
// write fails before any byte goes out, even a plain POST goes once more
// on a new connection, as with net/http, its body had again (GetBody).
func TestARequestNothingOfWhichWentOutIsResent(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	var dials atomic.Int32
	var fail atomic.Bool
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		armed := &fail
		if dials.Add(1) > 1 {
			armed = new(atomic.Bool) // the new connection's writes go through
		}
		return failingConn{Conn: c, fail: armed}, nil
	}
	for name, tr := range map[string]http.RoundTripper{
		"h1":       &gateway.HTTP1Transport{DialContext: dial},
		"net/http": &http.Transport{DialContext: dial, DisableCompression: true},
	} {
		t.Run(name, func(t *testing.T) {
			dials.Store(0)
			fail.Store(false)
			mu.Lock()
			bodies = nil
			mu.Unlock()
			defer tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			resp, err := tr.RoundTrip(leg(t, s.URL, false))
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp))
			fail.Store(true)
			resp, err = tr.RoundTrip(leg(t, s.URL, false))
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp))
			assert.Equal(t, int32(2), dials.Load(), "sent again on a new connection")
			mu.Lock()
			assert.Equal(t, []string{`{"prompt":"hi"}`, `{"prompt":"hi"}`}, bodies)
			mu.Unlock()
		})
	}
}
