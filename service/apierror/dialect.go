package apierror

import (
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// Dialect is the error shape of the API a client speaks: each front door
// answers an error in its client's own JSON and, once a stream has begun,
// as its own final event. The coordinator's errors are written here and
// nowhere else (AppendError, AppendErrorEvent).
type Dialect int

// The dialects.
const (
	// DialectOpenAI: {"error":{"message","type","param","code"}}; a cut
	// stream ends with one "data: {"error":{...}}" event (compat §15 D19).
	DialectOpenAI Dialect = iota
	// DialectResponses (OpenAI Responses): errors as DialectOpenAI; a cut
	// stream ends with the Responses error event, "event: error" with
	// {"type":"error","code","message","param"}.
	DialectResponses
	// DialectMessages (Anthropic Messages): {"type":"error","error":
	// {"type","message"}} with Anthropic's error types, also as a cut
	// stream's final "event: error".
	DialectMessages
)

// DialectOf is the dialect of a request body's API.
func DialectOf(f legs.Format) Dialect {
	switch f {
	case legs.FormatResponses:
		return DialectResponses
	case legs.FormatMessages:
		return DialectMessages
	}
	return DialectOpenAI
}

// AppendError appends the coordinator's error object in dialect d for an
// HTTP status: the message (which names the request id) and, where the
// dialect has one, param ("" for none).
func AppendError(dst []byte, d Dialect, code int, message, param string) []byte {
	if d != DialectMessages {
		return AppendOpenAIError(dst, code, message, param)
	}
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = jsonbody.AppendString(dst, anthropicType(code))
	dst = append(dst, `,"message":`...)
	dst = jsonbody.AppendString(dst, message)
	return append(dst, "}}"...)
}

// AppendErrorEvent appends the server-sent event that ends a stream cut
// short in dialect d, blank line included.
func AppendErrorEvent(dst []byte, d Dialect, code int, message, param string) []byte {
	switch d {
	case DialectResponses:
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"code\":"...)
		dst = jsonbody.AppendString(dst, errorType(code))
		dst = append(dst, `,"message":`...)
		dst = jsonbody.AppendString(dst, message)
		dst = append(dst, `,"param":`...)
		dst = appendParam(dst, param)
		return append(dst, "}\n\n"...)
	case DialectMessages:
		dst = append(dst, "event: error\ndata: "...)
	default:
		dst = append(dst, "data: "...)
	}
	dst = AppendError(dst, d, code, message, param)
	return append(dst, "\n\n"...)
}

// appendParam appends param as a JSON string, null when "".
func appendParam(dst []byte, param string) []byte {
	if param == "" {
		return append(dst, "null"...)
	}
	return jsonbody.AppendString(dst, param)
}

// anthropicType is the Anthropic error type for an HTTP status.
func anthropicType(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if code >= 400 && code < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}
