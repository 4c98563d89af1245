package media

import (
	"errors"
	"fmt"
)

// Reasons a download or a data URI is refused. Every *Error wraps exactly
// one of them, so errors.Is(err, ErrTooLarge) works through any wrapping.
var (
	// Client faults: the request names something the coordinator will not
	// fetch or accept (HTTP 400).
	ErrInvalidURL       = errors.New("invalid URL")
	ErrUnresolvable     = errors.New("host does not resolve")
	ErrScheme           = errors.New("scheme not allowed")
	ErrDomainNotAllowed = errors.New("domain not allowed")
	ErrBlockedAddress   = errors.New("address not allowed")
	ErrTooManyRedirects = errors.New("too many redirects")
	ErrTooLarge         = errors.New("too large")
	ErrTotalTooLarge    = errors.New("images too large in total")
	ErrNotImage         = errors.New("not an allowed image type")
	ErrDataURI          = errors.New("invalid data URI")

	// Origin faults: the image's server failed us (HTTP 502).
	ErrStatus      = errors.New("origin answered non-2xx")
	ErrUnreachable = errors.New("origin unreachable")
	ErrTimeout     = errors.New("download timed out")
	ErrTruncated   = errors.New("body truncated")
	ErrEmpty       = errors.New("empty body")
)

// Error is a refused data URI or a failed download. Its message is terse,
// names the problem and never quotes the origin's body.
//
// An Error unwraps to its Reason only, never to the transport error behind
// it: a dial timeout or a cancelled hop must not make errors.Is match
// context.DeadlineExceeded further up, where that would change the status
// the client gets. The transport error survives as text in the message.
type Error struct {
	// Reason is one of the Err* sentinels of this package.
	Reason error
	msg    string
}

func newError(reason error, format string, args ...any) *Error {
	return &Error{Reason: reason, msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the Reason.
func (e *Error) Unwrap() error { return e.Reason }

// OriginFailed reports whether the image's origin is to blame: not
// ClientFault. The service's status mapping asks it of an error (an image
// origin's failure is a bad gateway) without importing this package.
func (e *Error) OriginFailed() bool { return !e.ClientFault() }

// ClientFault reports whether the request is to blame (a blocked address,
// a domain not allowed, a bad scheme, URL or host, a name that does not
// exist, too many redirects, too large alone or with the request's other
// images, not an image, a bad data URI)
// rather than the origin (a non-2xx answer, a network error, a lookup that
// failed for another reason than the name, a timeout, a truncated or
// empty body).
func (e *Error) ClientFault() bool {
	switch e.Reason {
	case ErrInvalidURL, ErrUnresolvable, ErrScheme, ErrDomainNotAllowed, ErrBlockedAddress,
		ErrTooManyRedirects, ErrTooLarge, ErrTotalTooLarge, ErrNotImage, ErrDataURI:
		return true
	}
	return false
}
