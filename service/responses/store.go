// Package responses serves the stored OpenAI Responses: it keeps a
// response the client asked to store (responses.store.*), rebuilds the
// input of a request that continues one (previous_response_id) before any
// step runs, and answers the retrieval of a stored response, its deletion
// and its input items. The service calls it from both front doors (REST
// reaches the service in process); the bytes live in an
// internal/responsestore backend.
package responses

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/service/metrics"
)

var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service/responses")

// kind is the responsestore.Key kind of a stored response.
const kind = "response"

// pinger is a backend that can say whether it answers (Redis).
type pinger interface {
	Ping(ctx context.Context) error
}

// Store is the response store as the service uses it: a backend
// (memory or Redis), each operation timed, counted and traced.
type Store struct {
	backend responsestore.Store
	name    string // the backend's label: memory, redis
	opts    Options
	metrics *metrics.ResponseStore
	now     func() time.Time
}

// Options are what a Store serves with (config.Responses).
type Options struct {
	// TTL is how long a response is kept (> 0).
	TTL time.Duration
	// StoreByDefault stores a response whose request has no "store".
	StoreByDefault bool
	// MaxHistoryBytes bounds the input a previous_response_id rebuilds.
	MaxHistoryBytes int64
	// TenantHeader names the header (metadata key) whose value is the
	// tenant; "authorization": the bearer token's SHA-256; "": one tenant.
	TenantHeader string
}

// NewStore is a Store over backend, labelled name (memory, redis).
func NewStore(backend responsestore.Store, name string, o Options, m *metrics.ResponseStore) *Store {
	return &Store{backend: backend, name: name, opts: o, metrics: m, now: time.Now}
}

// Ready reports whether the store can be relied on now, before a request
// that needs it runs: a backend that can be pinged (Redis) is pinged (one
// round trip; ErrUnavailable when it does not answer), the memory backend
// always is.
func (s *Store) Ready(ctx context.Context) error {
	p, ok := s.backend.(pinger)
	if !ok {
		return nil
	}
	return s.observe(ctx, "ping", "", func(ctx context.Context) error { return p.Ping(ctx) })
}

// get is the value of key, or ErrNotFound, counted as a hit or a miss.
func (s *Store) get(ctx context.Context, key responsestore.Key) ([]byte, error) {
	var v []byte
	err := s.observe(ctx, "get", key.ID, func(ctx context.Context) error {
		var err error
		v, err = s.backend.Get(ctx, key)
		return err
	})
	if err == nil || errors.Is(err, responsestore.ErrNotFound) {
		s.metrics.Lookup(err == nil)
	}
	return v, err
}

// put stores value under key for the store's ttl, the write counted by
// outcome.
func (s *Store) put(ctx context.Context, key responsestore.Key, value []byte) error {
	err := s.observe(ctx, "put", key.ID, func(ctx context.Context) error { return s.backend.Put(ctx, key, value, s.opts.TTL) })
	switch {
	case err == nil:
		s.metrics.Write(metrics.StoreWriteOK, len(value))
	case errors.Is(err, responsestore.ErrUnavailable):
		s.metrics.Write(metrics.StoreWriteUnavailable, 0)
	case errors.Is(err, responsestore.ErrTooLarge):
		s.metrics.Write(metrics.StoreWriteTooLarge, 0)
	default:
		s.metrics.Write(metrics.StoreWriteError, 0)
	}
	return err
}

// remove deletes key, counted as a hit or a miss.
func (s *Store) remove(ctx context.Context, key responsestore.Key) error {
	err := s.observe(ctx, "delete", key.ID, func(ctx context.Context) error { return s.backend.Delete(ctx, key) })
	if err == nil || errors.Is(err, responsestore.ErrNotFound) {
		s.metrics.Lookup(err == nil)
	}
	return err
}

// observe runs op in a span of its own, records its latency, and notes
// whether the backend answered.
func (s *Store) observe(ctx context.Context, op, id string, fn func(context.Context) error) error {
	ctx, span := tracer.Start(ctx, "response_store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("coordinator.response_store.backend", s.name)))
	if id != "" {
		span.SetAttributes(attribute.String("coordinator.response_id", id))
	}
	start := s.now()
	err := fn(ctx)
	s.metrics.Operation(op, s.name, s.now().Sub(start))
	if err != nil && !errors.Is(err, responsestore.ErrNotFound) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// update changes the value of key by fn (responsestore.Store.Update), the
// write counted by outcome as put's.
func (s *Store) update(ctx context.Context, key responsestore.Key, fn func(old []byte) ([]byte, error)) error {
	n := 0
	err := s.observe(ctx, "update", key.ID, func(ctx context.Context) error {
		return s.backend.Update(ctx, key, s.opts.TTL, func(old []byte) ([]byte, error) {
			v, err := fn(old)
			n = len(v)
			return v, err
		})
	})
	switch {
	case err == nil:
		s.metrics.Write(metrics.StoreWriteOK, n)
	case errors.Is(err, responsestore.ErrUnavailable):
		s.metrics.Write(metrics.StoreWriteUnavailable, 0)
	case errors.Is(err, responsestore.ErrTooLarge):
		s.metrics.Write(metrics.StoreWriteTooLarge, 0)
	case errors.Is(err, responsestore.ErrNotFound):
		s.metrics.Lookup(false)
	case errors.Is(err, responsestore.ErrContended):
		s.metrics.Write(metrics.StoreWriteError, 0)
	}
	return err
}
