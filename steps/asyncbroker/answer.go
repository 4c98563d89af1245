package asyncbroker

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps"
)

// contentTypeJSON is the content type of the broker's pending answers and
// stored results.
const contentTypeJSON = "application/json"

// statusClientClosed is nginx's 499 Client Closed Request: the answer to a
// request its client cancelled before dispatch.
const statusClientClosed = 499

// The error codes of async-broker refusals (the async processor's result
// codes and the broker's own).
const (
	codeInvalidRequest   = "INVALID_REQUEST"
	codeDeadlineExceeded = "DEADLINE_EXCEEDED"
	codeGateDropped      = "GATE_DROPPED"
	codeCancelled        = "CANCELLED"
	codeEnqueueFailed    = "ENQUEUE_FAILED"
	codeUnknownRequest   = "UNKNOWN_REQUEST"
	codeLookupFailed     = "LOOKUP_FAILED"
	codeDeleteFailed     = "DELETE_FAILED"
	codeMalformedResult  = "MALFORMED_RESULT"
)

// The OpenAI error types of async-broker refusals.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAPI            = "api_error"
	typeTimeout        = "timeout_error"
	typeRateLimit      = "rate_limit_error"
	typeCancelled      = "cancelled"
)

// refusal is one of the broker's error answers (compat §7.7: a message,
// an OpenAI type and a string code); the service frames it.
func refusal(status int, errType, code, message string) *steps.Refusal {
	return &steps.Refusal{Status: status, Type: errType, Code: code, Message: message}
}

// refused is the answer that is r.
func refused(r *steps.Refusal) steps.Answer { return steps.Answer{Status: r.Status, Refusal: r} }

// invalid is the 400 of a request the broker refuses.
func invalid(message string) *steps.Refusal {
	return refusal(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, message)
}

// enqueueFailed is the 503 of a request Redis did not take.
func enqueueFailed() *steps.Refusal {
	return refusal(http.StatusServiceUnavailable, typeAPI, codeEnqueueFailed, "request could not be queued: broker unavailable")
}

// unknownRequest is the 410 of an id that is unknown, expired, deleted or
// another tenant's (they look alike on purpose).
func unknownRequest() *steps.Refusal {
	return refusal(http.StatusGone, typeInvalidRequest, codeUnknownRequest, "request id is unknown, expired, or already deleted")
}

// deadlineExceeded is the 504 of a wait whose deadline passed with no
// result.
func deadlineExceeded() *steps.Refusal {
	return refusal(http.StatusGatewayTimeout, typeTimeout, codeDeadlineExceeded, "request deadline exceeded before a result was produced")
}

// lookupFailed is the 500 of a fetch Redis did not answer.
func lookupFailed() *steps.Refusal {
	return refusal(http.StatusInternalServerError, typeAPI, codeLookupFailed, "result lookup failed")
}

// deleteFailed is the 500 of a delete Redis did not answer.
func deleteFailed() *steps.Refusal {
	return refusal(http.StatusInternalServerError, typeAPI, codeDeleteFailed, "result delete failed")
}

// pendingAnswer is 202 {"id":"<id>","status":"pending"}.
func pendingAnswer(id string) steps.Answer {
	b := append([]byte(nil), `{"id":`...)
	b = jsonbody.AppendString(b, id)
	b = append(b, `,"status":"pending"}`...)
	return steps.Answer{Status: http.StatusAccepted, ContentType: contentTypeJSON, Body: b}
}

// resultMessage is what the async processor stores in a mailbox
// (llm-d-async ResultMessage): an HTTP answer (status_code > 0, payload
// the body as a string) or a failure without one (error_code).
type resultMessage struct {
	ID           string `json:"id"`
	StatusCode   int    `json:"status_code"`
	Payload      string `json:"payload"`
	ErrorCode    string `json:"error_code"`
	ErrorMessage string `json:"error_message"`
}

// resultAnswer decodes a stored result into the client's answer: an HTTP
// result's status with its payload verbatim, else a refusal with the
// error code's status. A status outside 200..599 (which the HTTP server
// cannot send) is a malformed result: 502.
func resultAnswer(stored []byte) (steps.Answer, error) {
	var r resultMessage
	if err := json.Unmarshal(stored, &r); err != nil {
		return steps.Answer{}, fmt.Errorf("decode stored result: %w", err)
	}
	if r.StatusCode != 0 {
		if r.StatusCode < 200 || r.StatusCode > 599 {
			return refused(refusal(http.StatusBadGateway, typeAPI, codeMalformedResult,
				fmt.Sprintf("stored result has invalid status_code %d", r.StatusCode))), nil
		}
		return steps.Answer{Status: r.StatusCode, ContentType: contentTypeJSON, Body: []byte(r.Payload)}, nil
	}
	switch r.ErrorCode {
	case codeGateDropped:
		return refused(refusal(http.StatusTooManyRequests, typeRateLimit, r.ErrorCode, r.ErrorMessage)), nil
	case codeDeadlineExceeded:
		return refused(refusal(http.StatusGatewayTimeout, typeTimeout, r.ErrorCode, r.ErrorMessage)), nil
	case codeInvalidRequest:
		return refused(refusal(http.StatusBadRequest, typeInvalidRequest, r.ErrorCode, r.ErrorMessage)), nil
	case codeCancelled:
		return refused(refusal(statusClientClosed, typeCancelled, r.ErrorCode, r.ErrorMessage)), nil
	default:
		return refused(refusal(http.StatusBadGateway, typeAPI, r.ErrorCode, r.ErrorMessage)), nil
	}
}
