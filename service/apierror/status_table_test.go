package apierror

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
)

// TestStatusTableBothWays pins what each direction of the one table gives,
// the defaults included.
func TestStatusTableBothWays(t *testing.T) {
	t.Parallel()
	toCodes := map[int]codes.Code{
		400: codes.InvalidArgument, 422: codes.InvalidArgument, 413: codes.InvalidArgument,
		401: codes.Unauthenticated, 403: codes.PermissionDenied, 404: codes.NotFound, 409: codes.Aborted,
		412: codes.FailedPrecondition, 429: codes.ResourceExhausted, 501: codes.Unimplemented, 504: codes.DeadlineExceeded,
		418: codes.FailedPrecondition, 408: codes.FailedPrecondition, // other 4xx
		500: codes.Unavailable, 502: codes.Unavailable, 503: codes.Unavailable, 200: codes.Unavailable,
	}
	for httpStatus, want := range toCodes {
		assert.Equal(t, want, codeOf(httpStatus), "HTTP %d", httpStatus)
	}
	toStatuses := map[codes.Code]int{
		codes.OK: 200, codes.InvalidArgument: 400, codes.FailedPrecondition: 400, codes.OutOfRange: 400,
		codes.Unauthenticated: 401, codes.PermissionDenied: 403, codes.NotFound: 404, codes.ResourceExhausted: 429,
		codes.Canceled: 499, codes.Unimplemented: 501, codes.Unavailable: 503, codes.DeadlineExceeded: 504,
		codes.Aborted: 502, codes.Internal: 502, codes.Unknown: 502, codes.DataLoss: 502, codes.AlreadyExists: 502,
	}
	for code, want := range toStatuses {
		assert.Equal(t, want, statusOf(code), code.String())
	}
	for _, r := range statusTable {
		assert.NotZero(t, r.dir, "row %d/%s is read some way", r.status, r.code)
		if r.dir == both {
			assert.Equal(t, r.code, codeOf(r.status), "row %d read as a code", r.status)
			assert.Equal(t, r.status, statusOf(r.code), "row %s read as a status", r.code)
		}
	}
}
