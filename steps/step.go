// Package steps is the pipeline's contract: the Step interface and its
// Plugin, the per-request RequestContext and the Sink its answer goes to,
// the capabilities a step may add (capabilities.go), and the Pipeline that
// runs the configured steps in order. It names no step: the built-in steps
// are steps/builtin, one file each, and the async-broker step is
// steps/asyncbroker.
//
// What the steps share lives in libraries under internal/, which import no
// step: the request body (internal/requestbody), the worker wire shapes
// (internal/wire: legs, features, imageparts, pd, bodykeys) and the
// gateway client (internal/gateway).
//
// Steps never see transport types: they read and write the RequestContext,
// call the gateway through internal/gateway, and write the client's answer
// through the context's Sink.
package steps

import (
	"context"
	"errors"

	"go.uber.org/fx"
)

// Step is one configured stage of the pipeline. A Step is built once at
// startup from its params and then runs concurrently for many requests, so
// it must keep no per-request state of its own.
type Step interface {
	// Execute runs the step for one request. It returns nil to let the next
	// step run, ErrDone when the client has its answer and the pipeline must
	// stop, a *Refusal when the step refuses the request with an error
	// answer of its own (the service writes it), or an error that ends the
	// request.
	Execute(ctx context.Context, rc *RequestContext) error
}

// ErrDone ends the pipeline successfully: a step answered the client.
var ErrDone = errors.New("pipeline done")

// Plugin is one step type, as the fx value group "steps" carries it. The
// pipeline builder calls New once per occurrence of Type in the config.
type Plugin struct {
	// Type is the step's config name, e.g. "decode".
	Type string
	// New decodes the step's params strictly and builds the step. Params
	// carry the pipeline-level kv_connector, ec_connector and
	// use_openai_format when the step's own params do not set them.
	New func(params map[string]any) (Step, error)
}

// AsPlugin annotates a constructor returning a Plugin so fx puts its result
// in the "steps" group.
func AsPlugin(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"steps"`))
}
