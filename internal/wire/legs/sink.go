package legs

import "net/http"

// Sink is where a leg's answer goes on to the client: the relay
// (pd.Relay) writes it, the answer editor (pd.AnswerSink) wraps it. It has steps.Sink's methods and
// follows its contract: Header once, then Response once or Events per
// batch.
type Sink interface {
	// Header delivers the header of the worker's answer.
	Header(h http.Header)
	// Response delivers a whole answer: status, content type and body.
	Response(status int, contentType string, body []byte) error
	// Events delivers the data of server-sent events that arrived together,
	// and their types (names: nil when none of them has an "event:" field,
	// else parallel to data, "" for an event without one); the slices are
	// valid only during the call.
	Events(data [][]byte, names []string) error
}
