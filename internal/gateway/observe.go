package gateway

import (
	"context"
	"strings"
	"time"
)

// LegResult is how one attempt of a leg went.
type LegResult struct {
	// Leg names the leg ("encode[2]", "prefill", "render").
	Leg string
	// Phase is the leg's kind for metrics: encode, prefill, decode
	// (conditional-decode included) or render.
	Phase string
	// StatusCode is the answer's HTTP status; 0 when none came.
	StatusCode int
	// Duration is the time until the attempt's answer headers (or its
	// failure).
	Duration time.Duration
	// Attempt counts the tries of the leg from 1; a retried leg reports
	// each attempt.
	Attempt int
}

// Observer is told how each attempt of each leg of a request went
// (metrics). It must be safe for concurrent use: encode legs run in
// parallel.
type Observer interface {
	LegDone(LegResult)
}

type observerKey struct{}

// WithObserver returns ctx carrying o: every leg posted with that context
// (or one derived from it) reports to o.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

func observerFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}

// phaseOf is a leg's kind: its EPP profile, or "render" for the render
// service.
func phaseOf(r Request) string {
	if r.Profile != "" {
		return r.Profile
	}
	if i := strings.IndexByte(r.Leg, '['); i > 0 {
		return r.Leg[:i]
	}
	return r.Leg
}
