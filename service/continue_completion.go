package service

import (
	"context"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// This file continues a completion (an OpenAI input of endpoint
// COMPLETIONS, the worker's answer relayed) that a fleet pause aborted,
// as continue_generate.go does a REST generate request: its answer names
// the prompt's and the output's token IDs (return_token_ids), so the run
// after the resume gets the client's document with those as its prompt
// (tokens.CompletionContinuation). The runs and the answer's header are
// continue_generate.go's.

// completionContinuation is how the completion of rc is continued across
// a pause: the control plane on, the client did not opt out
// (headers.ContinueOnPause "false"), and the completion is one whose
// tokens the answer names (tokens.CompletionContinuable). nil: an abort
// reaches the client as the worker sent it.
func (c *Coordinator) completionContinuation(ctx context.Context, id string, rc *steps.RequestContext) (*continuedGenerate, error) {
	on, err := continueOnPause(ctx, id) // refused when malformed, as on every continued request
	if err != nil || !on || c.hold == nil || !tokens.CompletionContinuable(rc.Doc.Root()) {
		return nil, err
	}
	r := &continuedGenerate{pauseWatch: pauseWatch{hold: c.hold}, endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS}
	r.relayedContinuation = tokens.NewCompletionContinuation(rc.Doc.Root().Clone(), r.continues, c.maxAnswer)
	return r, nil
}

// Interface guard.
var _ relayedContinuation = (*tokens.CompletionContinuation)(nil)
