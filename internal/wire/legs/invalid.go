package legs

import (
	"errors"
	"fmt"
)

// ErrInvalidRequest marks errors caused by the client's input. It is
// steps.ErrInvalidRequest (as fs.ErrNotExist is os.ErrNotExist): defined
// here, the lowest package that finds client faults, so that every package
// under steps/ marks them with the one sentinel the service maps to 400.
var ErrInvalidRequest = errors.New("invalid request")

// Invalidf returns an ErrInvalidRequest error with a message for the client.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}
