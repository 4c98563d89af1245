package responses

import (
	"net/http"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps"
)

// The events that end a Responses stream, each carrying the whole
// response object (its "response" member).
var terminalEvents = [...]string{"response.completed", "response.incomplete", "response.failed"}

// Sink returns next, passing everything on as it is, with the turn's
// answer noted on the way: a whole 200 answer's body, or the response
// object of a stream's terminal event (copied: the event's buffers are
// reused). Nothing else of a stream is kept. A turn that neither stores
// nor continues a conversation returns next.
func (t *Turn) Sink(next steps.Sink) steps.Sink {
	if !t.capturing() {
		return next
	}
	return &capture{Sink: next, turn: t}
}

type capture struct {
	steps.Sink
	turn *Turn
}

// Header implements steps.Sink.
func (c *capture) Header(h http.Header) { c.Sink.Header(h) }

// Response implements steps.Sink.
func (c *capture) Response(status int, contentType string, body []byte) error {
	if status == http.StatusOK {
		c.turn.answer = body
	}
	return c.Sink.Response(status, contentType, body)
}

// Events implements steps.Sink.
func (c *capture) Events(data [][]byte, names []string) error {
	for i, name := range names {
		if terminal(name) {
			c.turn.answer = responseOf(data[i])
		}
	}
	return c.Sink.Events(data, names)
}

func terminal(name string) bool {
	for _, t := range terminalEvents {
		if name == t {
			return true
		}
	}
	return false
}

// responseOf is a copy of the "response" member of an event's data, nil
// when it has none.
func responseOf(data []byte) []byte {
	obj, err := jsonbody.ParseObject(data)
	if err != nil {
		return nil
	}
	raw, ok := obj.Get("response")
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	return append([]byte(nil), raw...)
}

var _ steps.Sink = (*capture)(nil)
