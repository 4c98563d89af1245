// Package tracing is the coordinator's OpenTelemetry tracing: the
// process's tracer provider and OTLP exporter set up from the config's
// tracing keys and the OTEL_* environment (tracing.go), and the server
// span each CoordinatorService call runs under (span.go).
package tracing
