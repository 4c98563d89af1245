package service

import (
	"context"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// This file continues a chat completion (an OpenAI input of endpoint
// CHAT_COMPLETIONS, the worker's answer relayed) that a fleet pause
// aborted, as continue_generate.go does a REST generate request, with
// vLLM's own way to go on with a chat: the run after the resume gets the
// client's messages and an assistant message of the text so far, which
// the model continues (continue_final_message; tokens.ChatContinuation).
// The runs and the answer's header are continue_generate.go's.

// relayedContinuation carries a request whose worker's answer is relayed
// across the aborts of pauses: tokens.GenerateContinuation,
// tokens.ChatContinuation.
type relayedContinuation interface {
	resumable
	// NextBody is the body of the next run; it starts that run.
	NextBody() ([]byte, error)
	// Answer takes a unary run's answer and returns what to send (nil:
	// nothing yet).
	Answer(body []byte) ([]byte, error)
	// Event takes a streamed run's event and returns what to send (nil:
	// nothing).
	Event(data []byte) ([]byte, error)
}

// chatContinuation is how the chat of rc is continued across a pause: the
// control plane on, the client did not opt out (headers.ContinueOnPause
// "false"), and the chat is one whose answer the continuation can follow
// (tokens.ChatContinuable: one choice of text, its tokens counted). nil:
// an abort reaches the client as the worker sent it.
func (c *Coordinator) chatContinuation(ctx context.Context, id string, rc *steps.RequestContext) (*continuedGenerate, error) {
	on, err := continueOnPause(ctx, id) // refused when malformed, as on every continued request
	if err != nil || !on || c.hold == nil || !tokens.ChatContinuable(rc.Doc.Root(), rc.Stream) {
		return nil, err
	}
	r := &continuedGenerate{pauseWatch: pauseWatch{hold: c.hold}, endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS}
	r.relayedContinuation = tokens.NewChatContinuation(rc.Doc.Root().Clone(), r.continues, c.maxAnswer)
	return r, nil
}

// Interface guards.
var (
	_ relayedContinuation = (*tokens.GenerateContinuation)(nil)
	_ relayedContinuation = (*tokens.ChatContinuation)(nil)
)
