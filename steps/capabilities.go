package steps

import (
	"context"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// A step may implement, besides Step, the small interfaces of this file
// (and RequestStore) to ask something of the pipeline or of the service.
// They are discovered by type assertion: the pipeline names no step.

// FirstStep is implemented by a step that must be the first of the
// pipeline, because it decides whether the other steps run at all (a
// request it queues never reaches them). NewPipeline fails when such a
// step is configured anywhere else.
type FirstStep interface {
	// RunsFirst marks the step; it is never called.
	RunsFirst()
}

// Starter is implemented by a step that owns resources opened with the
// app (connections, subscriptions). Pipeline.Start calls Start once, in
// config order, before any request; a Start error fails the app's start.
// Start must return by ctx's end (fx's start timeout) or its own bound,
// never hang, and release what it opened when it fails.
type Starter interface {
	Start(ctx context.Context) error
}

// Stopper is implemented by a step that must release resources when the
// app stops. Pipeline.Stop calls Stop once, in reverse config order,
// after the last request ended (the servers drained), for a step that
// started (or that has no Start). Stop should not outlast ctx by much.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Holder is implemented by a step that may hold a request open until a
// result arrives, possibly past the server's write timeout (the REST
// front then lifts the write deadline; the request's own deadline bounds
// it instead). Holds is called before the request runs, with the headers
// its legs would carry; it must be cheap and safe for concurrent use.
type Holder interface {
	Holds(header headers.Forwarded) bool
}
