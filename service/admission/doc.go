// Package admission decides whether the coordinator takes a call: the
// concurrency limits (RESOURCE_EXHAUSTED, REST 429, with a retry delay),
// the drain at shutdown (UNAVAILABLE, REST 503) and the readiness that
// /readyz and grpc.health.v1 report.
package admission
