package service

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// This file continues a tokens request that a fleet pause aborted (the
// continuation contract of docs/rl.md). A pause made through the control
// plane in mode "abort" ends every request in flight on the engines with
// finish_reason "abort" and the tokens generated so far. The coordinator
// paused the fleet itself, so it knows such an abort is not the answer's
// end: it holds the abort back from the client, waits for the resume as a
// new request would (control.hold bounds the wait), and runs the request
// again through the whole pipeline with the prompt and the output so far
// as its token IDs and what remains of max_tokens (tokens.Continuation).
// The client sees one answer.

// maxContinuations bounds the runs after the first of one request: each
// needs a pause of the fleet while it runs.
const maxContinuations = 8

// pauseWatch says whether a run's abort came from a pause of the fleet;
// one per continued request, tokens or REST generate.
type pauseWatch struct {
	hold *admission.Hold
	// since is the hold's Pauses when the current run started; runs counts
	// the runs after the first.
	since uint64
	runs  int
}

// continues reports whether the current run's abort came from a pause:
// one was in force, or began, since the run started.
func (w *pauseWatch) continues() bool {
	return w.runs < maxContinuations && w.hold.PausedSince(w.since)
}

// resumable is a request's answer carried across pauses: whether the last
// run's abort was held back, and how many tokens the answer has so far.
type resumable interface {
	Aborted() bool
	Generated() int
}

// continued is a tokens request the coordinator continues across pauses.
type continued struct {
	*tokens.Continuation
	pauseWatch
}

// continueOnPause reads the client's opt-out (headers.ContinueOnPause) from
// the call metadata: false when the client sent "false".
func continueOnPause(ctx context.Context, id string) (bool, error) {
	var v string
	if vs := metadata.ValueFromIncomingContext(ctx, headers.ContinueOnPause); len(vs) > 0 {
		v = vs[0]
	}
	on, err := headers.ParseContinueOnPause(v)
	if err != nil {
		return false, status.Errorf(codes.InvalidArgument, "%v (request_id: %s)", err, id)
	}
	return on, nil
}

// continuation is how a tokens request is continued across a pause: the
// control plane on, one choice, and the client did not opt out
// (headers.ContinueOnPause "false"). nil: an abort reaches the client as
// the worker sent it.
func (c *Coordinator) continuation(ctx context.Context, id string, in *coordinatorv1.TokensRequest) (*continued, error) {
	on, err := continueOnPause(ctx, id)
	if err != nil {
		return nil, err
	}
	if !on || c.hold == nil || !tokens.Continuable(in) {
		return nil, nil
	}
	r := &continued{pauseWatch: pauseWatch{hold: c.hold}}
	r.Continuation = tokens.NewContinuation(in, r.continues)
	return r, nil
}

// runTokens runs a tokens request: run sends one pass of it through the
// pipeline (in, then each continuation's request, with its request
// context). With cont, after a run whose abort cont held back, the request
// waits for the resume and runs again (runContinued).
func (c *Coordinator) runTokens(ctx context.Context, id, legID string, in *coordinatorv1.TokensRequest, stream bool, cont *continued,
	run func(*coordinatorv1.TokensRequest, *steps.RequestContext) error) error {
	pass := func(req *coordinatorv1.TokensRequest, leg string) error {
		rc := tokens.NewRequestContext(ctx, id, leg, req, stream)
		c.routeLegs(ctx, rc)
		return run(req, rc)
	}
	if cont == nil {
		return pass(in, legID)
	}
	return c.runContinued(ctx, id, legID, &cont.pauseWatch, cont, func(leg string) error {
		req := in
		if cont.runs > 0 {
			req = cont.Next()
		}
		return pass(req, leg)
	})
}

// runContinued runs a request that is continued across pauses: run sends
// one pass of it through the pipeline under leg (w.runs says which pass).
// After a pass whose abort answer held back, the request waits for the
// resume and runs again, its legs under a new leg id of the request (a KV
// hand-off is never named twice), registered in flight for the control
// plane's abort by id.
func (c *Coordinator) runContinued(ctx context.Context, id, legID string, w *pauseWatch, answer resumable, run func(leg string) error) error {
	leg := legID
	for {
		w.since = w.hold.Pauses()
		if err := run(leg); err != nil || !answer.Aborted() {
			return err
		}
		if err := c.awaitResume(ctx, id, answer.Generated()); err != nil {
			return err
		}
		w.runs++
		leg = headers.LegRequestID(id)
		defer c.inFlight.Add(id, leg)()
	}
}

// awaitResume waits for the fleet to resume, as a new request would; past
// control.hold's bounds the answer ends with the hold's UNAVAILABLE, its
// message saying what became of the request (generated tokens so far).
func (c *Coordinator) awaitResume(ctx context.Context, id string, generated int) error {
	err := c.admission.AwaitResume(ctx)
	if err == nil {
		c.metrics.Continuation(metrics.ContinuationResumed)
		return nil
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || st.Message() == admission.ErrShuttingDown.Error() {
		c.metrics.Continuation(metrics.ContinuationGone)
		return err
	}
	c.metrics.Continuation(metrics.ContinuationTimedOut)
	p := st.Proto()
	p.Message = fmt.Sprintf("a fleet pause stopped this request after %d tokens and it could not be continued: %s (request_id: %s)", generated, p.GetMessage(), id)
	return status.ErrorProto(p)
}
