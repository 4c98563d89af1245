package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// resendable reports whether req, whose round trip on c failed with err,
// may go once more on a new connection, as net/http's Transport decides:
// c was kept from an earlier request (a server that hangs up on a new
// connection would on the next), ctx goes on, no byte of an answer came,
// the failure is no timeout (the worker may be working on it), and req's
// body can be had again (none, or GetBody) and either nothing of req
// reached the connection or req is replayable (replayable). A kept
// connection the server closed after the liveness peek (alive) fails so:
// the server's idle timeout raced the request.
func (c *conn) resendable(ctx context.Context, req *http.Request, err error) bool {
	if !c.reused || c.heard || c.aborted.Load() || ctx.Err() != nil || !rewindable(req) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return !c.wrote || replayable(req)
}

// rewindable reports whether req's body can be sent again.
func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// replayable reports whether req may be sent twice (net/http's rule): an
// idempotent method, or a header map holding Idempotency-Key or
// X-Idempotency-Key, whose value may be nil: the key marks the request
// without going out (http.Header's writer writes no line for it).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// rewound is req with its body had again, to send it once more.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	again := *req
	again.Body = body
	return &again, nil
}
