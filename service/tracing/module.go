package tracing

import "go.uber.org/fx"

// Module installs the process's tracer provider from the config's tracing
// keys and the OTEL_* environment at construction (a setting that cannot
// work fails startup), and flushes the spans at stop.
var Module = fx.Module("tracing",
	fx.Provide(newTracing),
	fx.Invoke(func(*Tracing) {}),
)
