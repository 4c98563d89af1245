// Request ids: the id the coordinator sends as x-request-id on every leg
// and returns to the client, validated or made (compat D25 for the legs':
// leg_request_id.go).

package headers

import (
	"github.com/google/uuid"
)

// ValidRequestID reports whether id may be used as x-request-id on the legs: 1 to
// 128 characters of A-Z, a-z, 0-9 and '-' (as the reference).
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// RequestIDOrNew returns id when it is valid and a fresh UUIDv4 otherwise.
func RequestIDOrNew(id string) string {
	if ValidRequestID(id) {
		return id
	}
	return uuid.NewString()
}
