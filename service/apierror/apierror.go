// Package apierror is the one place a pipeline error becomes what a client
// sees: a gRPC status, and from it the REST status.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
)

// FromError is the one place a pipeline error becomes what the client
// sees: a gRPC status, whose code and details HTTPStatus turns into the REST
// status. Messages carry the request id and never an upstream body: the
// decode leg's is attached verbatim for relay, and of a leg's 4xx OpenAI
// error object only its message and param are kept (upstreamStatus). An
// image origin's failure is UNAVAILABLE with an UpstreamError of leg
// "image" (REST 502), and so is a prefill answer without the KV params its
// connector needs (D26), its leg "prefill", the message naming the fields.
func FromError(err error, requestID string) *status.Status {
	if s, ok := status.FromError(err); ok && err != nil {
		return s // already a status (e.g. from request validation)
	}
	var se *gateway.StatusError
	var te *gateway.TransportError
	var ie *pd.IncompleteKVError
	var of originFailure
	var tooLarge *legs.TooLargeError
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "request cancelled")
	case errors.Is(err, membudget.ErrExhausted):
		return BudgetStatus(err, requestID)
	case errors.As(err, &tooLarge):
		// A worker's answer past its cap: a bad gateway, naming the leg
		// and the cap.
		return withDetail(status.New(codes.Unavailable, fmt.Sprintf("%v (request_id: %s)", tooLarge, requestID)),
			&coordinatorv1.UpstreamError{Leg: tooLarge.Cap.Leg})
	case errors.As(err, &se):
		return upstreamStatus(se, requestID)
	case errors.Is(err, legs.ErrInvalidRequest):
		return status.New(codes.InvalidArgument, fmt.Sprintf("%v (request_id: %s)", err, requestID))
	case errors.As(err, &te):
		return transportStatus(te, requestID)
	case errors.As(err, &ie):
		return withDetail(status.New(codes.Unavailable, fmt.Sprintf("%v (request_id: %s)", ie, requestID)),
			&coordinatorv1.UpstreamError{Leg: ie.Leg, StatusCode: int32(ie.StatusCode)})
	case errors.As(err, &of) && of.OriginFailed():
		// An image's origin failed (non-2xx, unreachable, timed out, cut
		// short): a bad gateway, as the reference answers, whose message
		// names the image and its part; media errors never quote a body.
		return withDetail(status.New(codes.Unavailable, fmt.Sprintf("%v (request_id: %s)", err, requestID)),
			&coordinatorv1.UpstreamError{Leg: legImage})
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, fmt.Sprintf("request timed out (request_id: %s)", requestID))
	default:
		return status.New(codes.Internal, fmt.Sprintf("internal error (request_id: %s)", requestID))
	}
}

// BudgetRetryDelay is the wait a request refused by the memory budget is
// told (Retry-After): the budget frees as the requests in flight end.
const BudgetRetryDelay = time.Second

// BudgetStatus is a refusal of the memory budget (err wraps
// membudget.ErrExhausted): RESOURCE_EXHAUSTED with a RetryInfo (REST 429
// with Retry-After) when waiting may help, without one (REST 413) when the
// request can never fit.
func BudgetStatus(err error, requestID string) *status.Status {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("%v (request_id: %s)", err, requestID))
	var ex *membudget.ExhaustedError
	if errors.As(err, &ex) && ex.Never {
		return st
	}
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(BudgetRetryDelay)}); err == nil {
		return ds
	}
	return st
}

// originFailure is an error that may be an image origin's failure
// (internal/media's Error; asked by its method, so that the mapping imports no
// step's library).
type originFailure interface {
	error
	OriginFailed() bool
}

// upstreamStatus is the status of a leg's non-2xx answer. A 4xx whose
// body is an OpenAI error object keeps the worker's message and param, with
// the leg and the request id (compat §15 D20): "prefill rejected the
// request: n must be at least 1 (request_id: r)". Any other body, and every
// 5xx body, stays in the logs: "prefill failed: HTTP 503 (request_id: r)".
// A relayed answer (the decode legs') carries its body for the REST front.
func upstreamStatus(se *gateway.StatusError, requestID string) *status.Status {
	detail := &coordinatorv1.UpstreamError{Leg: se.Leg, StatusCode: int32(se.StatusCode), ContentType: se.ContentType}
	msg := fmt.Sprintf("%s failed: HTTP %d (request_id: %s)", se.Leg, se.StatusCode, requestID)
	if se.StatusCode >= 400 && se.StatusCode < 500 {
		what := fmt.Sprintf("HTTP %d", se.StatusCode)
		if m, param, ok := workerError(se.Body); ok {
			what, detail.Message, detail.Param = m, m, param
		}
		msg = fmt.Sprintf("%s rejected the request: %s (request_id: %s)", se.Leg, what, requestID)
	}
	if se.Relay {
		detail.Body, detail.Relay = se.Body, true
	}
	return withDetail(status.New(codeOf(se.StatusCode), msg), detail)
}

// RefusalStatus is a step's refusal as the error of a call that cannot
// carry it as an answer (a stream, whose messages have no status): the
// refusal's status mapped to a code, its message with the request id, and
// the framed answer attached as a relayed UpstreamError (leg: the step)
// for the REST front to write with the refusal's status.
func RefusalStatus(r *steps.Refusal, step, requestID string) *status.Status {
	a := RefusalAnswer(r)
	return withDetail(status.New(codeOf(r.Status), fmt.Sprintf("%s (request_id: %s)", r.Message, requestID)),
		&coordinatorv1.UpstreamError{Leg: step, StatusCode: int32(a.Status), ContentType: a.ContentType, Body: a.Body, Relay: true})
}

// transportStatus is the status of a leg that got no usable answer: a
// timeout (connect, response headers, a silent body) is DEADLINE_EXCEEDED
// (REST 504), anything else (refused, reset, not HTTP, a body cut off) is
// UNAVAILABLE (REST 502), a status outside 100-599 included. Both carry an
// UpstreamError without a status.
func transportStatus(te *gateway.TransportError, requestID string) *status.Status {
	code, what := codes.Unavailable, "unreachable"
	switch {
	case te.Timeout() && te.InBody:
		code, what = codes.DeadlineExceeded, "answer stalled"
	case te.Timeout():
		code, what = codes.DeadlineExceeded, "timed out"
	case te.InBody:
		what = "answer cut off"
	case errors.Is(te.Err, gateway.ErrInvalidStatus):
		what = "answered no HTTP status"
	}
	return withDetail(status.New(code, fmt.Sprintf("%s %s (request_id: %s)", te.Leg, what, requestID)),
		&coordinatorv1.UpstreamError{Leg: te.Leg})
}

// legImage names an image download in an UpstreamError.
const legImage = "image"

func withDetail(s *status.Status, d *coordinatorv1.UpstreamError) *status.Status {
	if ds, err := s.WithDetails(d); err == nil {
		return ds
	}
	return s
}

// UpstreamDetail returns the UpstreamError attached to s, if any.
func UpstreamDetail(s *status.Status) *coordinatorv1.UpstreamError {
	for _, d := range s.Details() {
		if u, ok := d.(*coordinatorv1.UpstreamError); ok {
			return u
		}
	}
	return nil
}

// HTTPStatus is the REST status for s: a leg's own 4xx (and any status of
// the decode leg) pass through; other upstream failures are 502, or 504 when
// the leg timed out; client faults 400; an oversized body 413; a refusal past
// a concurrency limit (RESOURCE_EXHAUSTED with a RetryInfo) 429; a server
// that is not serving 503.
func HTTPStatus(s *status.Status) int {
	if u := UpstreamDetail(s); u != nil {
		if u.StatusCode == 0 { // no answer from the leg
			if s.Code() == codes.DeadlineExceeded {
				return http.StatusGatewayTimeout
			}
			return http.StatusBadGateway
		}
		if u.Relay || (u.StatusCode >= 400 && u.StatusCode < 500) {
			return int(u.StatusCode)
		}
		if u.StatusCode == http.StatusGatewayTimeout {
			return http.StatusGatewayTimeout
		}
		return http.StatusBadGateway
	}
	if s.Code() == codes.ResourceExhausted {
		if _, ok := RetryDelay(s); !ok { // a size, not a concurrency limit
			return http.StatusRequestEntityTooLarge
		}
	}
	return statusOf(s.Code())
}

// RetryDelay is the wait the google.rpc.RetryInfo attached to s asks for
// (a refusal past a concurrency limit or while shutting down), if any.
func RetryDelay(s *status.Status) (time.Duration, bool) {
	for _, d := range s.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
