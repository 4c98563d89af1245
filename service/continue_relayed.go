package service

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// This file continues a request whose worker's answer is relayed (an
// OpenAI input: REST /inference/v1/generate, chat completions,
// completions) that a fleet pause aborted, as continuation.go does a
// tokens request: the abort is held back, the request waits for the
// resume and runs again with a continuation body, and the client gets one
// answer. Each API's body and answer are its tokens.*Continuation's:
//
//   - generate: the prompt and the output so far as token_ids
//     (tokens.GenerateContinuation);
//   - chat: the client's messages and an assistant message of the text so
//     far, which the model continues (vLLM's continue_final_message;
//     tokens.ChatContinuation);
//   - completions: the prompt's and the output's token IDs, which the
//     answer names (return_token_ids), as the prompt
//     (tokens.CompletionContinuation).

// relayedContinuation carries a request whose worker's answer is relayed
// across the aborts of pauses.
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

// Interface guards.
var (
	_ relayedContinuation = (*tokens.GenerateContinuation)(nil)
	_ relayedContinuation = (*tokens.ChatContinuation)(nil)
	_ relayedContinuation = (*tokens.CompletionContinuation)(nil)
)

// continuedRelay is a request whose answer is relayed that the
// coordinator continues across pauses; endpoint is its API's.
type continuedRelay struct {
	relayedContinuation
	pauseWatch
	endpoint coordinatorv1.Endpoint
}

// relayContinuation is how the request of rc is continued across a pause:
// the control plane on, the client did not opt out
// (headers.ContinueOnPause "false", checked on these three APIs only), and
// an answer the continuation can follow: a generate of one choice
// (tokens.GenerateContinuable), a chat of one choice of text whose tokens
// the answer counts (tokens.ChatContinuable), a completion whose tokens
// the answer names (tokens.CompletionContinuable). nil: an abort reaches
// the client as the worker sent it. Call it before the first run: it
// keeps rc's document as the run gets it.
func (c *Coordinator) relayContinuation(ctx context.Context, id string, rc *steps.RequestContext) (*continuedRelay, error) {
	endpoint, ok := relayedEndpoints[rc.Format]
	if !ok {
		return nil, nil
	}
	on, err := continueOnPause(ctx, id) // refused when malformed, as on a tokens request
	if err != nil || !on || c.hold == nil {
		return nil, err
	}
	r := &continuedRelay{pauseWatch: pauseWatch{hold: c.hold}, endpoint: endpoint}
	doc := rc.Doc.Root()
	switch {
	case rc.Format == legs.FormatGenerate && tokens.GenerateContinuable(doc):
		r.relayedContinuation = tokens.NewGenerateContinuation(doc.Clone(), r.continues, c.maxAnswer)
	case rc.Format == legs.FormatChat && tokens.ChatContinuable(doc, rc.Stream):
		r.relayedContinuation = tokens.NewChatContinuation(doc.Clone(), r.continues, c.maxAnswer)
	case rc.Format == legs.FormatCompletions && tokens.CompletionContinuable(doc):
		r.relayedContinuation = tokens.NewCompletionContinuation(doc.Clone(), r.continues, c.maxAnswer)
	default:
		return nil, nil
	}
	return r, nil
}

// relayedEndpoints are the APIs of the requests relayContinuation can
// continue.
var relayedEndpoints = map[legs.Format]coordinatorv1.Endpoint{
	legs.FormatGenerate:    coordinatorv1.Endpoint_ENDPOINT_GENERATE,
	legs.FormatChat:        coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS,
	legs.FormatCompletions: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS,
}

// runRelayed runs a request whose answer is relayed, continued across pauses
// (runContinued): the first run with rc, each later one with a request
// context of the continuation's body; sink is each run's sink.
func (c *Coordinator) runRelayed(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedRelay, method string, sink func() steps.Sink) error {
	return c.runContinued(ctx, id, legID, &cont.pauseWatch, cont, func(leg string) error {
		if cont.runs > 0 {
			var err error
			if rc, err = c.nextRelayedContext(ctx, id, leg, cont); err != nil {
				return err
			}
		}
		rc.Sink = sink()
		return c.run(ctx, rc, method)
	})
}

// nextRelayedContext is the request context of the continuation's next
// run, under leg. The body is the coordinator's: it is not held to the
// client's body limits, which its prompt may now pass.
func (c *Coordinator) nextRelayedContext(ctx context.Context, id, leg string, cont *continuedRelay) (*steps.RequestContext, error) {
	body, err := cont.NextBody()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v (request_id: %s)", err, id)
	}
	in := &coordinatorv1.OpenAIRequest{Endpoint: cont.endpoint, Json: body}
	rc, err := newRequestContext(ctx, id, in, requestbody.Limits{}, nil)
	if err != nil {
		return nil, err
	}
	rc.LegRequestID = leg
	c.routeLegs(ctx, rc)
	return rc, nil
}

// relayContinued serves Generate for a relayed request continued
// across pauses: the answer of each run goes through cont.Answer, and the
// one to send (the worker's, or the runs' merged) is the call's, with one
// header (answerHeader).
func (c *Coordinator) relayContinued(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedRelay) (*coordinatorv1.GenerateResponse, error) {
	var sink *unarySink
	runCtx, header := captureHeader(ctx)
	err := c.runRelayed(runCtx, id, legID, rc, cont, "Generate", func() steps.Sink {
		sink = &unarySink{}
		return continuedUnarySink{unarySink: sink, cont: cont}
	})
	header.flush(ctx)
	if err != nil {
		return nil, err
	}
	return sink.answer(id)
}

// relayStreamContinued serves GenerateStream for a relayed
// request continued across pauses: every run's events go through
// cont.Event on their way to the one stream.
func (c *Coordinator) relayStreamContinued(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedRelay,
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	sink := continuedStreamSink{Sink: newStreamSink(stream), cont: cont}
	return c.runRelayed(ctx, id, legID, rc, cont, "GenerateStream", func() steps.Sink { return sink })
}

// answerHeader keeps what the runs of a continued unary call set as the
// call's header, and sets it once they are done, so that the one answer
// has one header: each key as the last run set it (Date, Server-Timing,
// x-prefill-weight-version: the last prefill's), but x-weight-version,
// which names the versions from the first run's to the last's ("v1,v2").
type answerHeader struct {
	grpc.ServerTransportStream
	md metadata.MD
}

// captureHeader is ctx with its grpc.SetHeader kept by the answerHeader
// returned (nil, and ctx, on a context of no call).
func captureHeader(ctx context.Context) (context.Context, *answerHeader) {
	sts := grpc.ServerTransportStreamFromContext(ctx)
	if sts == nil {
		return ctx, nil
	}
	h := &answerHeader{ServerTransportStream: sts, md: metadata.MD{}}
	return grpc.NewContextWithServerTransportStream(ctx, h), h
}

// SetHeader keeps md, each key's values replacing those kept.
func (h *answerHeader) SetHeader(md metadata.MD) error {
	for k, v := range md {
		if old := h.md[k]; k == headers.WeightVersion && len(old) > 0 {
			v = []string{joinVersions(old[0], v)}
		}
		h.md[k] = v
	}
	return nil
}

// flush sets the header kept on ctx, the call's.
func (h *answerHeader) flush(ctx context.Context) {
	if h != nil && h.md.Len() > 0 {
		_ = grpc.SetHeader(ctx, h.md)
	}
}

// joinVersions is the comma-separated versions of from, then of more,
// each change once: "v1" then "v1,v2" is "v1,v2".
func joinVersions(from string, more []string) string {
	out := strings.Split(from, ",")
	for _, m := range more {
		for _, v := range strings.Split(m, ",") {
			if v != "" && out[len(out)-1] != v {
				out = append(out, v)
			}
		}
	}
	return strings.Join(out, ",")
}

// continuedUnarySink takes a unary run's answer through the continuation:
// the answer it keeps is the one to send.
type continuedUnarySink struct {
	*unarySink
	cont *continuedRelay
}

func (s continuedUnarySink) Response(status int, contentType string, body []byte) error {
	if status < http.StatusOK || status >= http.StatusMultipleChoices {
		return s.unarySink.Response(status, contentType, body)
	}
	out, err := s.cont.Answer(body)
	if err != nil || out == nil {
		return err
	}
	return s.unarySink.Response(status, contentType, out)
}

// continuedStreamSink passes a streamed run's events through the
// continuation, sending those it keeps.
type continuedStreamSink struct {
	steps.Sink
	cont *continuedRelay
}

func (s continuedStreamSink) Events(data [][]byte, names []string) error {
	var kept [][]byte // nil while every event goes out as it came
	var keptNames []string
	for i, d := range data {
		out, err := s.cont.Event(d)
		if err != nil {
			return err
		}
		if kept == nil && out != nil && len(out) == len(d) && (len(d) == 0 || &out[0] == &d[0]) {
			continue
		}
		if kept == nil {
			kept = append(make([][]byte, 0, len(data)), data[:i]...)
			if names != nil {
				keptNames = append(make([]string, 0, len(names)), names[:i]...)
			}
		}
		if out != nil {
			kept = append(kept, out)
			if names != nil {
				keptNames = append(keptNames, names[i])
			}
		}
	}
	if kept == nil {
		return s.Sink.Events(data, names)
	}
	if len(kept) == 0 {
		return nil
	}
	return s.Sink.Events(kept, keptNames)
}

// Interface guards.
var (
	_ steps.Sink = continuedUnarySink{}
	_ steps.Sink = continuedStreamSink{}
)
