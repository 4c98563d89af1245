package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error answered in vLLM's shape:
// {"error":{"message":...,"type":...,"param":...,"code":<status>}}.
type apiError struct {
	status  int
	message string
	param   string // "" is sent as null
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// badParam is a 400 about one request field, named as the error's param.
func badParam(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), param: param}
}

// strictError names a violated wire rule; tests match on the "sim: " prefix.
func strictError(rule string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: "sim: " + rule}
}

func modelNotFound(model string) *apiError {
	return &apiError{
		status:  http.StatusNotFound,
		message: "The model `" + model + "` does not exist.",
		param:   "model",
	}
}

// errorType is the vLLM / OpenAI error type for a status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusForbidden:
		return "PermissionDeniedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusMethodNotAllowed:
		return "MethodNotAllowedError"
	case http.StatusConflict:
		return "ConflictError"
	case http.StatusPreconditionFailed:
		return "PreconditionFailedError"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLargeError"
	case http.StatusUnprocessableEntity:
		return "UnprocessableEntityError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// writeError answers e as JSON.
func writeError(w http.ResponseWriter, e *apiError) {
	d := errorDetail{Message: e.message, Type: errorType(e.status), Code: e.status}
	if e.param != "" {
		d.Param = &e.param
	}
	body, err := json.Marshal(errorBody{Error: d})
	if err != nil { // unreachable: only strings and ints
		body = []byte(`{"error":{"message":"sim: encode error","type":"InternalServerError","param":null,"code":500}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

type anthropicErrorBody struct {
	Type  string         `json:"type"`
	Error anthropicError `json:"error"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// writeLegError answers e in the shape of the worker endpoint of format f:
// Anthropic's {"type":"error","error":{"type","message"}} on /v1/messages
// (vLLM's AnthropicErrorResponse), vLLM's OpenAI shape elsewhere.
func writeLegError(w http.ResponseWriter, f format, e *apiError) {
	if f != formatMessages {
		writeError(w, e)
		return
	}
	errType := "invalid_request_error"
	switch {
	case e.status == http.StatusNotFound:
		errType = "not_found_error"
	case e.status >= 500:
		errType = "api_error"
	}
	body, err := json.Marshal(anthropicErrorBody{Type: "error", Error: anthropicError{Type: errType, Message: e.message}})
	if err != nil { // unreachable: only strings
		body = []byte(`{"type":"error","error":{"type":"api_error","message":"sim: encode error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}
