package sim

import (
	"bytes"
	"net/http"
	"sync"
	"sync/atomic"
)

// Services named in [Leg.Service].
const (
	ServiceGateway = "gateway"
	ServiceRender  = "render"
)

// Leg is one request received by the gateway or the render service.
type Leg struct {
	// Service is [ServiceGateway] or [ServiceRender].
	Service string
	// Profile is the effective EPP profile of a gateway leg, lowercased:
	// "encode", "prefill", "decode" (also when the header is missing) or the
	// unknown value received. Empty for render legs.
	Profile string
	// Path is the request URL path.
	Path string
	// Header is the request header as received.
	Header http.Header
	// Body is the request body.
	Body []byte
	// Status is the response status, or 0 while no status was sent (a
	// request still running, a hang fault).
	Status int
	// Engine is the ID of the engine that answered the leg ("decode-1"),
	// empty until it answered (and for render legs).
	Engine string
}

// Legs returns a copy of the recorded legs, oldest first, in arrival order.
// The log keeps the most recent [Options.MaxLegs] legs and at most
// [Options.MaxLegBytes] of bodies.
func (s *Sim) Legs() []Leg {
	return s.legs.snapshot()
}

// legLog is the bounded, ordered record of legs. Its mutex is the only lock
// shared by all requests.
type legLog struct {
	maxLegs  int
	maxBytes int

	mu      sync.Mutex
	entries []*legEntry
	bytes   int
}

type legEntry struct {
	leg    Leg // immutable once appended, except through status and engine
	status atomic.Int32
	engine atomic.Pointer[string]
}

func newLegLog(maxLegs, maxBytes int) *legLog {
	return &legLog{maxLegs: maxLegs, maxBytes: maxBytes}
}

// record appends a leg and returns its entry (nil when recording is off).
// header and body must not be modified afterwards.
func (l *legLog) record(service, profile string, r *http.Request, body []byte) *legEntry {
	if l.maxLegs < 0 {
		return nil
	}
	e := &legEntry{leg: Leg{
		Service: service,
		Profile: profile,
		Path:    r.URL.Path,
		Header:  r.Header.Clone(),
		Body:    body,
	}}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	l.bytes += len(body)
	drop := 0
	for len(l.entries)-drop > 1 && (len(l.entries)-drop > l.maxLegs || l.bytes > l.maxBytes) {
		l.bytes -= len(l.entries[drop].leg.Body)
		l.entries[drop] = nil
		drop++
	}
	l.entries = l.entries[drop:]
	return e
}

func (l *legLog) snapshot() []Leg {
	l.mu.Lock()
	entries := make([]*legEntry, len(l.entries))
	copy(entries, l.entries)
	l.mu.Unlock()
	legs := make([]Leg, len(entries))
	for i, e := range entries {
		leg := e.leg
		leg.Header = leg.Header.Clone()
		leg.Body = bytes.Clone(leg.Body)
		leg.Status = int(e.status.Load())
		if id := e.engine.Load(); id != nil {
			leg.Engine = *id
		}
		legs[i] = leg
	}
	return legs
}

func (l *legLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
	l.bytes = 0
}

// statusWriter records the response status of a leg. It keeps the
// http.Flusher of the writer it wraps reachable through Unwrap.
type statusWriter struct {
	http.ResponseWriter
	entry       *legEntry
	wroteHeader bool
}

// trackStatus wraps w so the leg's status is recorded; it returns w itself
// when the leg is not recorded.
func trackStatus(w http.ResponseWriter, e *legEntry) http.ResponseWriter {
	if e == nil {
		return w
	}
	return &statusWriter{ResponseWriter: w, entry: e}
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		w.entry.status.Store(int32(code))
		if id := w.Header().Get(EngineHeader); id != "" {
			w.entry.engine.Store(&id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client.
func (w *statusWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter {
	return w.ResponseWriter
}

var _ http.Flusher = (*statusWriter)(nil)
