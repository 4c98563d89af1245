package apierror

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// statusClientClosed is nginx's 499 Client Closed Request.
const statusClientClosed = 499

// direction says which way a row of statusTable is read.
type direction uint8

const (
	toCode   direction = 1 << iota // a leg's HTTP status → the gRPC code (codeOf)
	toStatus                       // a gRPC code → the REST status (statusOf)
	both     = toCode | toStatus
)

// statusTable pairs HTTP statuses and gRPC codes, read both ways: codeOf
// takes the first toCode row with the status, statusOf the first toStatus
// row with the code. A pair read one way only says why.
var statusTable = []struct {
	status int
	code   codes.Code
	dir    direction
}{
	{http.StatusOK, codes.OK, toStatus},
	{http.StatusBadRequest, codes.InvalidArgument, both},
	{http.StatusUnprocessableEntity, codes.InvalidArgument, toCode},
	{http.StatusRequestEntityTooLarge, codes.InvalidArgument, toCode}, // a leg's 413: the client's prompt
	{http.StatusBadRequest, codes.FailedPrecondition, toStatus},       // any other 4xx of a leg is FailedPrecondition (codeOf)
	{http.StatusBadRequest, codes.OutOfRange, toStatus},
	{http.StatusUnauthorized, codes.Unauthenticated, both},
	{http.StatusForbidden, codes.PermissionDenied, both},
	{http.StatusNotFound, codes.NotFound, both},
	{http.StatusConflict, codes.Aborted, toCode},
	{http.StatusPreconditionFailed, codes.FailedPrecondition, toCode},
	{http.StatusTooManyRequests, codes.ResourceExhausted, both}, // statusOf: 413 instead without a RetryInfo (HTTPStatus)
	{statusClientClosed, codes.Canceled, toStatus},
	{http.StatusNotImplemented, codes.Unimplemented, both},
	{http.StatusServiceUnavailable, codes.Unavailable, toStatus}, // a leg's 5xx is Unavailable (codeOf's default)
	{http.StatusGatewayTimeout, codes.DeadlineExceeded, both},
}

// codeOf is the gRPC code of a leg's HTTP status: the table's, else
// FailedPrecondition for a 4xx and Unavailable for anything else.
func codeOf(httpStatus int) codes.Code {
	for _, r := range statusTable {
		if r.dir&toCode != 0 && r.status == httpStatus {
			return r.code
		}
	}
	if httpStatus >= 400 && httpStatus < 500 {
		return codes.FailedPrecondition
	}
	return codes.Unavailable
}

// statusOf is the REST status of a gRPC code: the table's, else 502.
func statusOf(code codes.Code) int {
	for _, r := range statusTable {
		if r.dir&toStatus != 0 && r.code == code {
			return r.status
		}
	}
	return http.StatusBadGateway
}
