package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a response store write (coordinator_response_store_writes_total).
const (
	StoreWriteOK          = "ok"
	StoreWriteUnavailable = "unavailable"
	StoreWriteTooLarge    = "too_large"
	StoreWriteError       = "error"
)

// ResponseStore are the response store's collectors: lookups by result
// (hit, miss), writes by outcome, bytes written, evictions, and latency
// by operation and backend.
type ResponseStore struct {
	lookups   *prometheus.CounterVec
	writes    *prometheus.CounterVec
	bytes     prometheus.Counter
	evictions prometheus.Counter
	latency   *prometheus.HistogramVec
}

// NewResponseStore registers the response store's collectors on m's
// registry. Call it once.
func (m *Metrics) NewResponseStore() *ResponseStore {
	s := &ResponseStore{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinator_response_store_lookups_total",
			Help: "Stored responses and conversations looked up (previous_response_id, conversation, retrieve, items, delete) by result: hit or miss (unknown, expired, evicted or another tenant's).",
		}, []string{"result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinator_response_store_writes_total",
			Help: "Responses and conversations written to the store by outcome: ok, unavailable (the backend did not answer), too_large (past responses.store.max_bytes), error.",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinator_response_store_written_bytes_total",
			Help: "Bytes of the responses and conversations written to the store (their records: the response, its input and history; the conversation and its items).",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinator_response_store_evictions_total",
			Help: "Responses the memory backend evicted to make room (responses.store.max_bytes, max_entries).",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coordinator_response_store_duration_seconds",
			Help:    "Response store operation latency by operation (get, put, update, delete, ping) and backend (memory, redis).",
			Buckets: stepBuckets,
		}, []string{"operation", "backend"}),
	}
	for _, r := range []string{"hit", "miss"} {
		s.lookups.WithLabelValues(r)
	}
	for _, o := range []string{StoreWriteOK, StoreWriteUnavailable, StoreWriteTooLarge, StoreWriteError} {
		s.writes.WithLabelValues(o)
	}
	m.registry.MustRegister(s.lookups, s.writes, s.bytes, s.evictions, s.latency)
	return s
}

// Lookup counts a lookup: hit or not.
func (s *ResponseStore) Lookup(hit bool) {
	if hit {
		s.lookups.WithLabelValues("hit").Inc()
		return
	}
	s.lookups.WithLabelValues("miss").Inc()
}

// Write counts a write by outcome, and its bytes when it succeeded.
func (s *ResponseStore) Write(outcome string, n int) {
	s.writes.WithLabelValues(outcome).Inc()
	if outcome == StoreWriteOK {
		s.bytes.Add(float64(n))
	}
}

// Evicted counts n evictions.
func (s *ResponseStore) Evicted(n int) { s.evictions.Add(float64(n)) }

// Operation records one operation's latency.
func (s *ResponseStore) Operation(op, backend string, d time.Duration) {
	s.latency.WithLabelValues(op, backend).Observe(d.Seconds())
}
