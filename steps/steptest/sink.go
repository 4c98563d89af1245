// Package steptest has fakes and helpers for step tests.
package steptest

import (
	"sync"
)

// Sink records what a step delivers to the client. Safe for concurrent use.
type Sink struct {
	mu          sync.Mutex
	Status      int
	ContentType string
	Body        []byte
	Events      [][]byte
	// Flushes counts Flush calls; Flushed is how many events had been
	// delivered at the last one.
	Flushes, Flushed int
	// FailAfter, if > 0, makes Event fail once that many events were taken,
	// as a client that went away.
	FailAfter int
	// Err is what Event returns past FailAfter.
	Err error
}

// Response implements steps.Sink.
func (s *Sink) Response(status int, contentType string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Status, s.ContentType, s.Body = status, contentType, body
	return nil
}

// Event implements steps.Sink; it copies data.
func (s *Sink) Event(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.FailAfter > 0 && len(s.Events) >= s.FailAfter {
		return s.Err
	}
	s.Events = append(s.Events, append([]byte(nil), data...))
	return nil
}

// Flush implements steps.Sink; it counts the flushes.
func (s *Sink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Flushes++
	s.Flushed = len(s.Events)
	return nil
}

// FlushedEvents is how many events had been delivered at the last Flush.
func (s *Sink) FlushedEvents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Flushed
}

// EventStrings returns the events as strings.
func (s *Sink) EventStrings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.Events))
	for i, e := range s.Events {
		out[i] = string(e)
	}
	return out
}
