package steptest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Leg is one request a fake server received.
type Leg struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Gateway is an httptest server on 127.0.0.1 that records every request
// and answers with Handle. Handlers must not call t.Fatal: record, then
// assert on the test goroutine.
type Gateway struct {
	*httptest.Server
	mu   sync.Mutex
	legs []Leg
}

// NewGateway starts a recording server answering with handle; it is closed
// when the test ends.
func NewGateway(t testing.TB, handle http.HandlerFunc) *Gateway {
	g := &Gateway{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.legs = append(g.legs, Leg{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		g.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		handle(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// Legs returns what was received so far.
func (g *Gateway) Legs() []Leg {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Leg(nil), g.legs...)
}
