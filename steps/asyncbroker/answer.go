package asyncbroker

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps"
)

// contentTypeJSON is the content type of every async-broker answer.
const contentTypeJSON = "application/json"

// statusClientClosed is nginx's 499 Client Closed Request: the answer to a
// request its client cancelled before dispatch.
const statusClientClosed = 499

// The error codes of async-broker answers (the async processor's result
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

// The OpenAI error types of async-broker answers.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAPI            = "api_error"
	typeTimeout        = "timeout_error"
	typeRateLimit      = "rate_limit_error"
	typeCancelled      = "cancelled"
)

// errorAnswer is the async-broker's OpenAI error envelope:
// {"error":{"message":...,"type":...,"code":...}} (compat §7.7; the code is
// a string here, unlike the service's own errors).
func errorAnswer(status int, errType, code, message string) steps.Answer {
	b := append([]byte(nil), `{"error":{"message":`...)
	b = jsonbody.AppendString(b, message)
	b = append(b, `,"type":`...)
	b = jsonbody.AppendString(b, errType)
	b = append(b, `,"code":`...)
	b = jsonbody.AppendString(b, code)
	b = append(b, "}}"...)
	return steps.Answer{Status: status, ContentType: contentTypeJSON, Body: b}
}

// invalidAnswer is a 400 for a request the broker refuses.
func invalidAnswer(message string) steps.Answer {
	return errorAnswer(http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, message)
}

// pendingAnswer is 202 {"id":"<id>","status":"pending"}.
func pendingAnswer(id string) steps.Answer {
	b := append([]byte(nil), `{"id":`...)
	b = jsonbody.AppendString(b, id)
	b = append(b, `,"status":"pending"}`...)
	return steps.Answer{Status: http.StatusAccepted, ContentType: contentTypeJSON, Body: b}
}

// unknownAnswer is the 410 of an id that is unknown, expired, deleted or
// another tenant's (they look alike on purpose).
func unknownAnswer() steps.Answer {
	return errorAnswer(http.StatusGone, typeInvalidRequest, codeUnknownRequest, "request id is unknown, expired, or already deleted")
}

// deadlineAnswer is the 504 of a wait whose deadline passed with no result.
func deadlineAnswer() steps.Answer {
	return errorAnswer(http.StatusGatewayTimeout, typeTimeout, codeDeadlineExceeded, "request deadline exceeded before a result was produced")
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
// result's status with its payload verbatim, else the error code's status
// with the error envelope. A status outside 200..599 (which the HTTP
// server cannot send) is a malformed result: 502.
func resultAnswer(stored []byte) (steps.Answer, error) {
	var r resultMessage
	if err := json.Unmarshal(stored, &r); err != nil {
		return steps.Answer{}, fmt.Errorf("decode stored result: %w", err)
	}
	if r.StatusCode != 0 {
		if r.StatusCode < 200 || r.StatusCode > 599 {
			return errorAnswer(http.StatusBadGateway, typeAPI, codeMalformedResult,
				fmt.Sprintf("stored result has invalid status_code %d", r.StatusCode)), nil
		}
		return steps.Answer{Status: r.StatusCode, ContentType: contentTypeJSON, Body: []byte(r.Payload)}, nil
	}
	switch r.ErrorCode {
	case codeGateDropped:
		return errorAnswer(http.StatusTooManyRequests, typeRateLimit, r.ErrorCode, r.ErrorMessage), nil
	case codeDeadlineExceeded:
		return errorAnswer(http.StatusGatewayTimeout, typeTimeout, r.ErrorCode, r.ErrorMessage), nil
	case codeInvalidRequest:
		return errorAnswer(http.StatusBadRequest, typeInvalidRequest, r.ErrorCode, r.ErrorMessage), nil
	case codeCancelled:
		return errorAnswer(statusClientClosed, typeCancelled, r.ErrorCode, r.ErrorMessage), nil
	default:
		return errorAnswer(http.StatusBadGateway, typeAPI, r.ErrorCode, r.ErrorMessage), nil
	}
}
