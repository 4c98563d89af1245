package gateway

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
)

// body is an answer's body as RoundTrip returns it: it reads from the
// connection, hands the connection back to the Transport once read to its
// end, and closes it when closed before. Read and Close may be called
// concurrently (a Close ends a pending Read).
type body struct {
	rc  io.ReadCloser // http.ReadResponse's body
	t   *HTTP1Transport
	c   *conn
	ctx context.Context
	// keep is whether the connection may carry another request once the
	// body is read: neither side asked to close it.
	keep bool

	closed atomic.Bool // by Close
	done   atomic.Bool // the connection was handed back or closed
}

func newBody(ctx context.Context, t *HTTP1Transport, c *conn, resp *http.Response) *body {
	return &body{rc: resp.Body, t: t, c: c, ctx: ctx, keep: !resp.Close && !resp.Request.Close}
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		b.finish(true)
		return n, io.EOF
	case b.ctx.Err() != nil && b.c.aborted.Load():
		err = context.Cause(b.ctx)
	case b.closed.Load():
		err = http.ErrBodyReadAfterClose
	}
	b.finish(false)
	return n, err
}

// Close implements io.Closer: a body not read to its end closes its
// connection.
func (b *body) Close() error {
	b.closed.Store(true)
	b.finish(false)
	return nil
}

// finish hands the connection back (eof, and reusable) or closes it, once.
func (b *body) finish(eof bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.c.release(eof && b.keep) {
		b.t.put(b.c)
		return
	}
	b.c.close()
}
