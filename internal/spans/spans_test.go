package spans

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Not parallel: it sets the process's tracer provider.
func TestOnFollowsTheGlobalProvider(t *testing.T) {
	assert.False(t, On(), "no provider installed")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = On() }))

	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(t.Context()) }()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	assert.True(t, On(), "a provider installed after start")
	otel.SetTracerProvider(prev)
	assert.False(t, On(), "the initial delegate put back")
}
