// Package steptest has fakes and helpers for step tests.
package steptest

import (
	"net/http"
	"sync"
)

// Sink records what a step delivers to the client. Safe for concurrent use.
type Sink struct {
	mu          sync.Mutex
	Status      int
	ContentType string
	Body        []byte
	// Headers holds a copy of each header delivered, in order.
	Headers []http.Header
	// Received holds each event's data, in order.
	Received [][]byte
	// Names holds each event's type, parallel to Received ("" for none).
	Names []string
	// Batches holds the number of events of each Events call.
	Batches []int
	// FailAfter, if > 0, makes Events fail once that many events were
	// taken, as a client that went away.
	FailAfter int
	// Err is what Events returns past FailAfter.
	Err error
}

// Header implements steps.Sink; it keeps a copy.
func (s *Sink) Header(h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Headers = append(s.Headers, h.Clone())
}

// Response implements steps.Sink.
func (s *Sink) Response(status int, contentType string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Status, s.ContentType, s.Body = status, contentType, body
	return nil
}

// Events implements steps.Sink; it copies data and records the batch.
func (s *Sink) Events(data [][]byte, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Batches = append(s.Batches, len(data))
	for i, d := range data {
		if s.FailAfter > 0 && len(s.Received) >= s.FailAfter {
			return s.Err
		}
		s.Received = append(s.Received, append([]byte(nil), d...))
		name := ""
		if names != nil {
			name = names[i]
		}
		s.Names = append(s.Names, name)
	}
	return nil
}

// EventStrings returns the events received so far as strings.
func (s *Sink) EventStrings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.Received))
	for i, e := range s.Received {
		out[i] = string(e)
	}
	return out
}
