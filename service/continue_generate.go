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

// This file continues a REST /inference/v1/generate request (an OpenAI
// input of endpoint GENERATE: the client's vLLM body, the worker's answer
// relayed) that a fleet pause aborted, as continuation.go does a tokens
// request: the abort is held back, the request waits for the resume and
// runs again with the prompt and the output so far as its token_ids
// (tokens.GenerateContinuation), and the client gets one answer. A chat
// runs and answers the same way (continue_chat.go).

// continuedGenerate is a REST request whose answer is relayed (generate,
// or chat: continue_chat.go) that the coordinator continues across
// pauses; endpoint is its API's.
type continuedGenerate struct {
	relayedContinuation
	pauseWatch
	endpoint coordinatorv1.Endpoint
}

// generateContinuation is how the request of rc is continued across a
// pause: a generate body, the control plane on, sampling_params.n at most
// 1, and the client did not opt out (headers.ContinueOnPause "false"); a
// chat as chatContinuation says, a completion as completionContinuation
// (continue_completion.go). nil: an abort reaches the client as the
// worker sent it. Call it before the first run: it keeps rc's document as
// the run gets it.
func (c *Coordinator) generateContinuation(ctx context.Context, id string, rc *steps.RequestContext) (*continuedGenerate, error) {
	if rc.Format == legs.FormatChat {
		return c.chatContinuation(ctx, id, rc)
	}
	if rc.Format == legs.FormatCompletions {
		return c.completionContinuation(ctx, id, rc)
	}
	if rc.Format != legs.FormatGenerate {
		return nil, nil
	}
	on, err := continueOnPause(ctx, id) // refused when malformed, as on a tokens request
	if err != nil || !on || c.hold == nil || !tokens.GenerateContinuable(rc.Doc.Root()) {
		return nil, err
	}
	r := &continuedGenerate{pauseWatch: pauseWatch{hold: c.hold}, endpoint: coordinatorv1.Endpoint_ENDPOINT_GENERATE}
	r.relayedContinuation = tokens.NewGenerateContinuation(rc.Doc.Root().Clone(), r.continues, c.maxAnswer)
	return r, nil
}

// runGenerate runs a REST generate request continued across pauses
// (runContinued): the first run with rc, each later one with a request
// context of the continuation's body; sink is each run's sink.
func (c *Coordinator) runGenerate(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedGenerate, method string, sink func() steps.Sink) error {
	return c.runContinued(ctx, id, legID, &cont.pauseWatch, cont, func(leg string) error {
		if cont.runs > 0 {
			var err error
			if rc, err = c.nextGenerateContext(ctx, id, leg, cont); err != nil {
				return err
			}
		}
		rc.Sink = sink()
		return c.run(ctx, rc, method)
	})
}

// nextGenerateContext is the request context of the continuation's next
// run, under leg. The body is the coordinator's: it is not held to the
// client's body limits, which its prompt may now pass.
func (c *Coordinator) nextGenerateContext(ctx context.Context, id, leg string, cont *continuedGenerate) (*steps.RequestContext, error) {
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

// generateContinued serves Generate for a REST generate request continued
// across pauses: the answer of each run goes through cont.Answer, and the
// one to send (the worker's, or the runs' merged) is the call's, with one
// header (answerHeader).
func (c *Coordinator) generateContinued(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedGenerate) (*coordinatorv1.GenerateResponse, error) {
	var sink *unarySink
	runCtx, header := captureHeader(ctx)
	err := c.runGenerate(runCtx, id, legID, rc, cont, "Generate", func() steps.Sink {
		sink = &unarySink{}
		return continuedUnarySink{unarySink: sink, cont: cont}
	})
	header.flush(ctx)
	if err != nil {
		return nil, err
	}
	if sink.streamed {
		return nil, status.Errorf(codes.Internal, "decode worker streamed an answer to a non-streaming request (request_id: %s)", id)
	}
	return &coordinatorv1.GenerateResponse{
		RequestId: id,
		Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{
			StatusCode:  int32(sink.status),
			ContentType: sink.contentType,
			Json:        sink.body,
		}},
	}, nil
}

// generateStreamContinued serves GenerateStream for a REST generate
// request continued across pauses: every run's events go through
// cont.Event on their way to the one stream.
func (c *Coordinator) generateStreamContinued(ctx context.Context, id, legID string, rc *steps.RequestContext, cont *continuedGenerate,
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	sink := continuedStreamSink{Sink: newStreamSink(stream), cont: cont}
	return c.runGenerate(ctx, id, legID, rc, cont, "GenerateStream", func() steps.Sink { return sink })
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
	cont *continuedGenerate
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
	cont *continuedGenerate
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
