package apierror

import (
	"net/http"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps"
)

// The OpenAI error object, written here and nowhere else, in its two
// shapes: the coordinator's own errors (AppendOpenAIError: REST error
// answers and SSE error events) and the refusals steps decide
// (AppendRefusal: async-broker's, over REST and inside gRPC answers).

// ContentTypeJSON is the content type of an OpenAI error answer.
const ContentTypeJSON = "application/json"

// AppendOpenAIError appends the coordinator's error object for an HTTP
// status: {"error":{"message","type","param","code"}}, the type derived
// from the status, param null when "", code the status as a number.
func AppendOpenAIError(dst []byte, code int, message, param string) []byte {
	dst = appendMessageType(dst, message, errorType(code))
	dst = append(dst, `,"param":`...)
	dst = appendParam(dst, param)
	dst = append(dst, `,"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	return append(dst, "}}"...)
}

// AppendRefusal appends a step's refusal: {"error":{"message","type",
// "code"}} with the step's own type and string code and no param (compat
// §7.7, the async processor's shape).
func AppendRefusal(dst []byte, r *steps.Refusal) []byte {
	dst = appendMessageType(dst, r.Message, r.Type)
	dst = append(dst, `,"code":`...)
	dst = jsonbody.AppendString(dst, r.Code)
	return append(dst, "}}"...)
}

// RefusalAnswer is the whole answer a client receives for r: its status,
// application/json and the framed object.
func RefusalAnswer(r *steps.Refusal) steps.Answer {
	return steps.Answer{Status: r.Status, ContentType: ContentTypeJSON, Body: AppendRefusal(nil, r)}
}

func appendMessageType(dst []byte, message, errType string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = jsonbody.AppendString(dst, message)
	dst = append(dst, `,"type":`...)
	return jsonbody.AppendString(dst, errType)
}

// errorType is the OpenAI error type for an HTTP status.
func errorType(code int) string {
	switch {
	case code == http.StatusTooManyRequests:
		return "rate_limit_error"
	case code == http.StatusUnauthorized:
		return "authentication_error"
	case code == http.StatusForbidden:
		return "permission_error"
	case code == http.StatusNotFound:
		return "not_found_error"
	case code == http.StatusGatewayTimeout:
		return "timeout_error"
	case code >= 400 && code < 500:
		return "invalid_request_error"
	default:
		return "api_error"
	}
}
