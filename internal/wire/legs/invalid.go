package legs

import (
	"errors"
	"fmt"
)

// ErrInvalidRequest marks errors caused by the client's input: defined
// here, the lowest package that finds client faults, so that the request
// body, the wire shapes and every step mark them with the one sentinel the
// service maps to 400 (wrap it, or use Invalidf).
var ErrInvalidRequest = errors.New("invalid request")

// Invalidf returns an ErrInvalidRequest error with a message for the client.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}
