package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// conn is one connection: used by one round trip at a time, kept by the
// Transport between them.
type conn struct {
	nc  net.Conn
	br  *bufio.Reader // reads through conn.Read
	raw syscall.RawConn
	key string // host:port
	// limit is what the answer's header may still take while one is read
	// (maxHeaderBytes at its start), -1 otherwise.
	limit int64
	// stop unregisters abort from the round trip's context; false once
	// abort ran.
	stop    func() bool
	aborted atomic.Bool
	werr    error // the last write's failure, from the connection
	// reused: kept from an earlier request; wrote: a byte of the request
	// went out; heard: a byte of the answer came (resendable).
	reused, wrote, heard bool
	// head is the request's header while write holds it back, for it to
	// go out with what follows it; holding: the next write is the header.
	head    []byte
	holding bool
	// vec is writeHeadAnd's list of what one writev sends, kept for its
	// array; out is that list as the writev consumes it. Both fields, not
	// locals, so that a write allocates nothing.
	vec, out  net.Buffers
	idleTimer *time.Timer // IdleConnTimeout's, while kept
}

// readBufferSize is a connection's read buffer, held for as long as the
// connection lives, an open stream's included. A line of the header or a
// chunk's size line longer than it is read in parts, and a read of a body
// into a buffer at least this large bypasses it (bufio.Reader); but each
// chunk's size line is read through it, so the events of a stream that
// arrived together take one read system call per buffer. net/http's
// Transport has 4 KiB. 2 KiB holds several usual events, and spares an
// open stream 2 KiB: a stream whose events come at the pace of tokens
// reads them one by one whatever the size, and one that arrived all at
// once (the bench's simulator, with no token delay) takes about two more
// reads a request than with 4 KiB (five more with 1 KiB).
const readBufferSize = 2 << 10

// aLongTimeAgo is a deadline in the past: it fails the connection's
// pending and next reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

func newConn(nc net.Conn, key string) *conn {
	c := &conn{nc: nc, key: key, limit: -1}
	c.br = bufio.NewReaderSize(c, readBufferSize)
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c
}

// Read is what the connection's reader reads: the connection, within the
// header's limit while one is read.
func (c *conn) Read(p []byte) (int, error) {
	if c.limit < 0 {
		return c.nc.Read(p)
	}
	if c.limit == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.nc.Read(p)
	c.limit -= int64(n)
	return n, err
}

// roundTrip writes req and reads the answer's header (skipping 1xx
// answers), its body left to read. ctx ending aborts it (abort) until the
// body is done with the connection.
func (c *conn) roundTrip(ctx context.Context, req *http.Request, headerTimeout time.Duration) (*http.Response, error) {
	c.stop = context.AfterFunc(ctx, c.abort)
	if err := c.write(req); err != nil {
		return c.earlyAnswer(req, err)
	}
	if headerTimeout > 0 {
		c.setReadDeadline(time.Now().Add(headerTimeout))
	}
	resp, err := c.readHeader(req)
	if headerTimeout > 0 {
		c.setReadDeadline(time.Time{})
	}
	var ne net.Error
	if err != nil && headerTimeout > 0 && errors.As(err, &ne) && ne.Timeout() && !c.aborted.Load() {
		return nil, headerTimeoutError{}
	}
	return resp, err
}

// earlyAnswerWait bounds the wait for the answer of a server that stopped
// reading the request (earlyAnswer).
const earlyAnswerWait = time.Second

// earlyAnswer is the outcome of a request whose writing failed with err.
// When the connection failed, the server may have answered before it read
// the whole body, and closed: that answer is the round trip's, as with
// net/http. A request body that failed as it was read fails the round
// trip with its own error, and the request, cut short, gets no answer;
// nor does a request nothing of which went out.
func (c *conn) earlyAnswer(req *http.Request, err error) (*http.Response, error) {
	if c.werr == nil || c.aborted.Load() || !c.wrote {
		return nil, err
	}
	c.setReadDeadline(time.Now().Add(earlyAnswerWait))
	resp, rerr := c.readHeader(req)
	c.setReadDeadline(time.Time{})
	if rerr != nil {
		return nil, err
	}
	resp.Close = true
	return resp, nil
}

// write sends req through a shared buffered writer; a failure of the
// connection is kept in c.werr. The header is held back (Write) to go out
// with the body: net/http's writer flushes it on its own before a body it
// does not know to be in memory, such as upstream's net.Buffers, which
// then goes out with it in one writev (ReadFrom). A small leg is one system
// call, not two, and the worker reads it whole.
func (c *conn) write(req *http.Request) error {
	c.werr, c.wrote, c.heard = nil, false, false
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		req = tracked(req)
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(c)
	c.holding = true
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = c.flushHead()
	}
	c.holding = false
	c.head = c.head[:0]
	if cap(c.head) > maxHeldHead {
		c.head = nil
	}
	bw.Reset(nil)
	writers.Put(bw)
	if err != nil {
		if b, ok := req.Body.(*trackedBody); ok && b.err != nil {
			return b.err
		}
	}
	return err
}

// maxHeldHead bounds the held-back header a connection keeps between two
// requests: the writer's buffer, which the header of a leg fits.
const maxHeldHead = 4 << 10

// Write is what the request writer writes to: the connection, its failure
// kept. The first write of a request (the header, or all of a small
// request) is held back, and goes out with the next one.
func (c *conn) Write(p []byte) (int, error) {
	if c.holding {
		c.holding = false
		c.head = append(c.head[:0], p...)
		return len(p), nil
	}
	if len(c.head) > 0 {
		return c.writeHeadAnd(p)
	}
	n, err := c.nc.Write(p)
	c.wrote = c.wrote || n > 0
	if err != nil {
		c.werr = err
	}
	return n, err
}

// flushHead writes the held-back header, if any.
func (c *conn) flushHead() error {
	if len(c.head) == 0 {
		return nil
	}
	_, err := c.writeHeadAnd()
	return err
}

// writeHeadAnd writes the held-back header, if any, then bufs, and drops
// the header: in one writev on a TCP connection. It returns what it wrote of
// bufs.
func (c *conn) writeHeadAnd(bufs ...[]byte) (int, error) {
	head := len(c.head)
	c.vec = c.vec[:0]
	if head > 0 {
		c.vec = append(c.vec, c.head)
	}
	c.vec = append(c.vec, bufs...)
	c.out = c.vec
	n, err := c.out.WriteTo(c.nc)
	c.wrote = c.wrote || n > 0
	clear(c.vec) // the array stays, not the request's pieces
	c.vec, c.out, c.head = c.vec[:0], nil, c.head[:0]
	if cap(c.vec) > maxHeldPieces {
		c.vec = nil
	}
	if err != nil {
		c.werr = err
	}
	return max(0, int(n)-head), err
}

// maxHeldPieces bounds the list of buffers a connection keeps between two
// writes: a leg's body is a few pieces.
const maxHeldPieces = 64

// ReadFrom is how the request writer hands the connection a body it does
// not buffer. upstream's body of pieces, net.Buffers, goes out with the
// held-back header in one writev (on the TCP connection h1 dials, not on
// one a DialContext wrapped); any other body in copies of copyBufferSize,
// as net/http's writer does (its connection's ReadFrom), not in writes of
// the writer's 4 KiB.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok && c.raw != nil {
		if body, ok := lr.R.(*net.Buffers); ok && buffersLen(*body) == lr.N {
			n, err := c.writeHeadAnd(*body...)
			*body, lr.N = nil, 0
			return int64(n), err
		}
	}
	if err := c.flushHead(); err != nil {
		return 0, err
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(writeOnly{c}, r, *buf)
}

func buffersLen(bufs net.Buffers) int64 {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// copyBufferSize is the size of the writes of a large request body.
const copyBufferSize = 32 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// writeOnly hides conn's ReadFrom from io.CopyBuffer, which would call it
// again.
type writeOnly struct{ c *conn }

func (w writeOnly) Write(p []byte) (int, error) { return w.c.Write(p) }

// tracked is req with its body a trackedBody: a body that cannot be had
// again is a stream, which may fail as it is read, and its own error is
// the round trip's then. (Apart from write, whose frame stays small
// without the copy of req: every leg's goroutine takes it.)
func tracked(req *http.Request) *http.Request {
	r := *req
	r.Body = &trackedBody{ReadCloser: req.Body}
	return &r
}

// trackedBody keeps the failure of a request body's Read.
type trackedBody struct {
	io.ReadCloser
	err error
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// readHeader reads the answer's status line and header, skipping 1xx
// answers; all of them together within maxHeaderBytes, as net/http's.
func (c *conn) readHeader(req *http.Request) (*http.Response, error) {
	c.limit = maxHeaderBytes
	defer func() { c.heard, c.limit = c.limit < maxHeaderBytes, -1 }()
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("h1: 101 Switching Protocols is not supported")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// abort fails the connection's pending and next reads and writes: the
// round trip's context ended.
func (c *conn) abort() {
	c.aborted.Store(true)
	_ = c.nc.SetDeadline(aLongTimeAgo)
}

// setReadDeadline sets the read deadline (the zero time lifts it), unless
// abort set its own in the meantime: a context that ended while the
// request was written must not be overridden by the header's deadline.
func (c *conn) setReadDeadline(t time.Time) {
	_ = c.nc.SetReadDeadline(t)
	if c.aborted.Load() {
		_ = c.nc.SetDeadline(aLongTimeAgo)
	}
}

// release ends c's round trip: it stays usable when the answer was read to
// its end, the context never aborted it and nobody asked to close it.
func (c *conn) release(reusable bool) bool {
	stopped := c.stop()
	return reusable && stopped && c.br.Buffered() == 0
}

// alive reports whether a kept connection can take a request: the server
// has neither closed it nor sent anything since the last answer. It peeks
// at the socket without waiting (one system call), where net/http's read
// loop keeps a read pending on every kept connection.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	if c.raw == nil {
		return true
	}
	return peekIdle(c.raw)
}

func (c *conn) close() { _ = c.nc.Close() }
