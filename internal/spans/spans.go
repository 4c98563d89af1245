// Package spans tells whether this process traces: whether a tracer
// provider is installed (otel.SetTracerProvider). Without one every span
// is a no-op, yet starting one still costs allocations (its options, a
// context, the no-op span's own); the places that start spans ask On
// first and, with tracing off, skip the span, its attributes and the
// propagation that goes with it, so a request pays nothing for tracing.
//
// On follows the global provider, not a setting read once: a test that
// installs a provider after start, or puts the default back, is traced
// accordingly.
package spans

import "go.opentelemetry.io/otel"

// initial is the global tracer provider as the process starts: OpenTelemetry's
// delegate, which makes no-op spans until a provider is installed.
var initial = otel.GetTracerProvider()

// On reports whether a tracer provider other than OpenTelemetry's initial
// no-op delegate is installed. It does not allocate.
func On() bool { return otel.GetTracerProvider() != initial }
