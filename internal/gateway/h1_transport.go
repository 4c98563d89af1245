// The legs' HTTP/1.1 transport (h1_*.go): HTTP1Transport makes each round trip on
// the caller's goroutine: the caller writes the request, then reads the
// answer's header and, as it reads the body, the body, from the
// connection. It keeps no goroutine of its own.
//
// net/http's Transport keeps two goroutines a connection (a read loop and
// a write loop) and hands every request and every answer across them: a
// few goroutine switches a request, each a thread wake-up on a loaded
// machine, and two goroutines held by every open answer, a stream waiting
// on its worker included. The coordinator's legs are all this transport
// does: requests to one or a few plain-http hosts over keep-alive
// connections, one request at a time on each. It writes the very bytes
// net/http's Transport writes (both use http.Request's writer), refuses
// the requests it refuses (h1_valid.go), sends a request once more where it
// would (h1_resend.go) and reads answers with http.ReadResponse. It does not
// do HTTPS, HTTP/2, proxies, 100-continue or compression (a leg asks for
// none).

package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTP1Transport is an http.RoundTripper for plain-http requests. Its zero
// value dials with a net.Dialer and keeps two idle connections a host.
// Safe for concurrent use.
type HTTP1Transport struct {
	// DialContext opens a connection; nil: a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdleConnsPerHost bounds the connections kept between requests,
	// per host; 0 means 2, as net/http's default.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a kept connection idle that long; 0: never.
	IdleConnTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the answer's header once
	// the request is written; 0: no bound. A body is never cut by it.
	ResponseHeaderTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn // by host:port, the most recently used last
}

// maxHeaderBytes bounds an answer's status line and header: past it the
// round trip fails instead of buffering more.
const maxHeaderBytes = 1 << 20

// errHeaderTooLarge is the failure of an answer whose header passes
// maxHeaderBytes.
var errHeaderTooLarge = errors.New("h1: answer header larger than 1 MiB")

// RoundTrip implements http.RoundTripper: it sends req on a kept
// connection, or a new one, and returns the answer with its body unread.
// The body reads from the connection; the connection is kept for the next
// request once the body was read to its end, and closed when the body is
// closed before. req's context ending fails the round trip, or the body's
// next Read, with the context's cause. A round trip on a kept connection
// that failed before any byte of the answer came is made once more, on a
// new connection, when net/http's would (conn.resendable).
func (t *HTTP1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := supported(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	key := hostPort(req)
	c, err := t.conn(ctx, key)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.try(ctx, c, req)
	if err != nil && c.resendable(ctx, req, err) {
		return t.resend(ctx, key, req, err)
	}
	return resp, err
}

// try makes req's round trip on c: the answer, its body reading from c, or
// the failure, c closed.
func (t *HTTP1Transport) try(ctx context.Context, c *conn, req *http.Request) (*http.Response, error) {
	resp, err := c.roundTrip(ctx, req, t.ResponseHeaderTimeout)
	if err != nil {
		c.stop()
		c.close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	resp.Body = newBody(ctx, t, c, resp)
	return resp, nil
}

// resend sends req once more, on a new connection, after its round trip
// on a kept one failed with first (conn.resendable). A body that cannot be
// had again fails it with first.
func (t *HTTP1Transport) resend(ctx context.Context, key string, req *http.Request, first error) (*http.Response, error) {
	again, err := rewound(req)
	if err != nil {
		return nil, first
	}
	nc, err := t.dial(ctx, key)
	if err != nil {
		closeBody(again)
		return nil, err
	}
	return t.try(ctx, newConn(nc, key), again)
}

// supported refuses what the transport does not do, and what net/http's
// refuses (valid).
func supported(req *http.Request) error {
	switch {
	case req.URL == nil:
		return errors.New("h1: nil request URL")
	case req.URL.Scheme != "http":
		return fmt.Errorf("h1: unsupported protocol scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("h1: no host in request URL")
	}
	return valid(req)
}

// closeBody closes req's body, as a RoundTripper must even on failure.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// hostPort is the address req goes to, with port 80 when the URL has none.
func hostPort(req *http.Request) string {
	if port := req.URL.Port(); port != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// conn is a kept connection to key still open, or a new one.
func (t *HTTP1Transport) conn(ctx context.Context, key string) (*conn, error) {
	for {
		c := t.takeIdle(key)
		if c == nil {
			break
		}
		if c.alive() {
			c.reused = true
			return c, nil
		}
		c.close()
	}
	nc, err := t.dial(ctx, key)
	if err != nil {
		return nil, err
	}
	return newConn(nc, key), nil
}

// dial opens a connection to key.
func (t *HTTP1Transport) dial(ctx context.Context, key string) (net.Conn, error) {
	if t.DialContext == nil {
		return defaultDialer.DialContext(ctx, "tcp", key)
	}
	return t.DialContext(ctx, "tcp", key)
}

// takeIdle is the most recently kept connection to key, nil if none.
func (t *HTTP1Transport) takeIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[key]
	n := len(list)
	if n == 0 {
		return nil
	}
	c := list[n-1]
	list[n-1] = nil
	t.idle[key] = list[:n-1]
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	return c
}

// put keeps c for the next request to its host, or closes it when the
// host has enough kept.
func (t *HTTP1Transport) put(c *conn) {
	limit := t.MaxIdleConnsPerHost
	if limit <= 0 {
		limit = 2
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*conn)
	}
	if len(t.idle[c.key]) >= limit {
		t.mu.Unlock()
		c.close()
		return
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	if d := t.IdleConnTimeout; d > 0 {
		if c.idleTimer == nil {
			c.idleTimer = time.AfterFunc(d, func() { t.expire(c) })
		} else {
			c.idleTimer.Reset(d)
		}
	}
	t.mu.Unlock()
}

// expire closes c if it is still kept (IdleConnTimeout).
func (t *HTTP1Transport) expire(c *conn) {
	t.mu.Lock()
	list := t.idle[c.key]
	for i, k := range list {
		if k == c {
			t.idle[c.key] = append(list[:i], list[i+1:]...)
			t.mu.Unlock()
			c.close()
			return
		}
	}
	t.mu.Unlock()
}

// CloseIdleConnections closes the kept connections; those in use are
// closed when their answer ends.
func (t *HTTP1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			if c.idleTimer != nil {
				c.idleTimer.Stop()
			}
			c.close()
		}
	}
}

// defaultDialer dials for a Transport without DialContext.
var defaultDialer net.Dialer

// writers are the request writers, shared: a connection needs one only
// while it writes.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

var _ http.RoundTripper = (*HTTP1Transport)(nil)

// headerTimeoutError is the failure of an answer whose header did not come
// within ResponseHeaderTimeout: a timeout, as net/http's.
type headerTimeoutError struct{}

func (headerTimeoutError) Error() string   { return "h1: timeout awaiting response headers" }
func (headerTimeoutError) Timeout() bool   { return true }
func (headerTimeoutError) Temporary() bool { return true }

var _ net.Error = headerTimeoutError{}
