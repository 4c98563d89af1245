package config

import (
	"fmt"
	"time"
)

// The response store's backends (responses.store.backend).
const (
	// StoreMemory keeps responses in this process (the default).
	StoreMemory = "memory"
	// StoreRedis keeps them in the Redis of responses.store.redis_url,
	// shared by every replica.
	StoreRedis = "redis"
	// StoreOff keeps none: "store": true, previous_response_id and
	// conversation are refused (400), every request is served
	// statelessly.
	StoreOff = "off"
)

// TenantAuthorization as responses.tenant_header makes the tenant the
// SHA-256 of the request's bearer token (never the token itself).
const TenantAuthorization = "authorization"

// Responses configures the stored OpenAI Responses (coordinator extension,
// docs/responses-messages.md "Stored responses"): "store",
// previous_response_id, GET and DELETE /v1/responses/{id} and
// /v1/responses/{id}/input_items, and the Conversations API
// (/v1/conversations..., "conversation" on /v1/responses) on the same
// store.
type Responses struct {
	// Store is where the responses are kept.
	Store ResponseStore `param:"store"`
	// StoreByDefault stores a response whose request has no "store" (the
	// OpenAI default). Key responses.store_by_default, default true, env
	// COORDINATOR_RESPONSES_STORE_BY_DEFAULT.
	StoreByDefault bool `param:"store_by_default"`
	// TenantHeader names the request header whose value owns a stored
	// response (e.g. "OpenAI-Project"); another tenant's id answers 404 as
	// a missing one. "authorization" takes the SHA-256 of the bearer token.
	// Key responses.tenant_header, default "" (one tenant), env
	// COORDINATOR_RESPONSES_TENANT_HEADER.
	TenantHeader string `param:"tenant_header"`
	// MaxHistoryBytes bounds the input a previous_response_id rebuilds, in
	// bytes: past it the request gets 400 before any leg. Key
	// responses.max_history_bytes, default 8388608 (8 MiB), env
	// COORDINATOR_RESPONSES_MAX_HISTORY_BYTES.
	MaxHistoryBytes int64 `param:"max_history_bytes"`
}

// ResponseStore is the response store's backend and bounds.
type ResponseStore struct {
	// Backend is memory, redis or off. Key responses.store.backend,
	// default memory, env COORDINATOR_RESPONSES_STORE_BACKEND.
	Backend string `param:"backend"`
	// RedisURL is the Redis of the redis backend,
	// redis://[user:password@]host:port[/db] (rediss:// for TLS). Key
	// responses.store.redis_url, env COORDINATOR_RESPONSES_STORE_REDIS_URL.
	// Unreachable at start is no startup failure: the requests that need
	// the store get 503 until it answers.
	RedisURL string `param:"redis_url"`
	// TTL is how long a response is kept. Key responses.store.ttl, default
	// 720h (OpenAI keeps 30 days), env COORDINATOR_RESPONSES_STORE_TTL.
	TTL time.Duration `param:"ttl"`
	// MaxBytes bounds the memory backend's responses together, in
	// megabytes (MiB), and any one response on either backend; the least
	// recently used are evicted to make room. Key responses.store.max_bytes,
	// default 256, env COORDINATOR_RESPONSES_STORE_MAX_BYTES.
	MaxBytes int `param:"max_bytes"`
	// MaxEntries bounds the memory backend's responses by count. Key
	// responses.store.max_entries, default 100000, env
	// COORDINATOR_RESPONSES_STORE_MAX_ENTRIES.
	MaxEntries int `param:"max_entries"`
}

// defaultResponses is Responses' defaults.
func defaultResponses() Responses {
	return Responses{
		Store:           ResponseStore{Backend: StoreMemory, TTL: 720 * time.Hour, MaxBytes: 256, MaxEntries: 100000},
		StoreByDefault:  true,
		MaxHistoryBytes: 8 * mib,
	}
}

// Enabled reports whether responses are stored (the backend is not off).
func (r Responses) Enabled() bool { return r.Store.Backend != StoreOff }

// Bytes is MaxBytes in bytes.
func (s ResponseStore) Bytes() int64 { return int64(s.MaxBytes) * mib }

func (r Responses) validate() error {
	switch r.Store.Backend {
	case StoreMemory, StoreOff:
	case StoreRedis:
		if r.Store.RedisURL == "" {
			return fmt.Errorf("responses.store.redis_url: required by backend redis")
		}
	default:
		return fmt.Errorf("responses.store.backend: unknown backend %q (known: memory, off, redis)", r.Store.Backend)
	}
	switch {
	case r.Store.TTL <= 0:
		return fmt.Errorf("responses.store.ttl: must be positive, got %s", r.Store.TTL)
	case r.Store.MaxBytes < 1:
		return fmt.Errorf("responses.store.max_bytes: must be at least 1, got %d", r.Store.MaxBytes)
	case r.Store.MaxEntries < 1:
		return fmt.Errorf("responses.store.max_entries: must be at least 1, got %d", r.Store.MaxEntries)
	case r.MaxHistoryBytes < 1:
		return fmt.Errorf("responses.max_history_bytes: must be at least 1, got %d", r.MaxHistoryBytes)
	case r.TenantHeader != "" && !isToken(r.TenantHeader):
		return fmt.Errorf("responses.tenant_header: not a header name: %q", r.TenantHeader)
	}
	return nil
}

// isToken reports whether s is a header name of letters, digits and '-'.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != ""
}
