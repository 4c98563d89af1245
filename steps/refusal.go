package steps

import "fmt"

// Refusal is an error answer a step decides itself: the HTTP status and
// the OpenAI error fields it chose (a type and a machine-readable code),
// not yet framed. Steps never write error JSON: the service frames a
// Refusal for the front door (REST and gRPC: the OpenAI error object
// {"error":{"message","type","code"}} with the code as a string, compat
// §7.7).
//
// A step refuses a request by returning a *Refusal from Execute, before it
// wrote anything to the sink: the pipeline stops as for ErrDone and the
// service answers the refusal through the request's sink, as a whole
// answer. A RequestStore answers with one in Answer.Refusal.
type Refusal struct {
	// Status is the HTTP status: 4xx or 5xx (499: the client went away).
	Status int
	// Type is the OpenAI error type, e.g. "invalid_request_error".
	Type string
	// Code is the machine-readable code, e.g. "INVALID_REQUEST".
	Code string
	// Message is for the client.
	Message string
}

// Error implements error.
func (r *Refusal) Error() string {
	return fmt.Sprintf("refused with HTTP %d (%s): %s", r.Status, r.Code, r.Message)
}
