package headers

import (
	"fmt"
	"strings"
)

// ContinueOnPause is the request header by which a client opts out of the
// continuation of its request across a fleet pause ("false"); "true", the
// default, keeps it. The coordinator's own: it never reaches a leg.
const ContinueOnPause = internalPrefix + "continue-on-pause"

// ParseContinueOnPause reads a ContinueOnPause value: empty is true;
// anything but true or false (any case) is an error.
func ParseContinueOnPause(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s must be true or false, not %q", ContinueOnPause, v)
}
