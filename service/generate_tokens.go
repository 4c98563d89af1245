package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/tokens"
	"github.com/coordinator-project/coordinator/steps"
)

// generateTokens serves a tokens input of Generate: the request becomes a
// vLLM /inference/v1/generate body and runs through the pipeline like a REST
// request to that path; the decode worker's answer becomes a TokensResponse.
// An answer a fleet pause aborted is continued once the fleet resumes
// (continuation.go).
func (c *Coordinator) generateTokens(ctx context.Context, id, legID string, in *coordinatorv1.TokensRequest) (*coordinatorv1.GenerateResponse, error) {
	cont, err := c.continuation(ctx, id, in)
	if err != nil {
		return nil, err
	}
	var answer *coordinatorv1.TokensResponse
	runCtx, header := ctx, (*answerHeader)(nil)
	if cont != nil { // one answer, one header
		runCtx, header = captureHeader(ctx)
	}
	err = c.runTokens(runCtx, id, legID, in, false, cont, func(req *coordinatorv1.TokensRequest, rc *steps.RequestContext) error {
		sink := tokens.NewUnarySink(req, c.versionCheck(runCtx, rc))
		rc.Sink = sink
		if err := c.run(runCtx, rc, "Generate"); err != nil {
			return err
		}
		answer = sink.Answer()
		if answer != nil && cont != nil {
			cont.Answer(answer)
			answer = cont.Result()
		}
		return nil
	})
	header.flush(ctx)
	if err != nil {
		return nil, err
	}
	if answer == nil {
		return nil, status.Errorf(codes.Internal, "the pipeline gave no answer (request_id: %s)", id)
	}
	return &coordinatorv1.GenerateResponse{
		RequestId: id,
		Output:    &coordinatorv1.GenerateResponse_Tokens{Tokens: answer},
	}, nil
}

// generateTokensStream serves a tokens input of GenerateStream: as
// generateTokens, with the worker's stream sent on as TokensChunk messages.
func (c *Coordinator) generateTokensStream(id, legID string, in *coordinatorv1.TokensRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	ctx := stream.Context()
	cont, err := c.continuation(ctx, id, in)
	if err != nil {
		return err
	}
	if cont != nil {
		stream = cont.Stream(stream)
	}
	return c.runTokens(ctx, id, legID, in, true, cont, func(_ *coordinatorv1.TokensRequest, rc *steps.RequestContext) error {
		rc.Sink = tokens.NewStreamSink(stream, c.versionCheck(ctx, rc))
		return c.run(ctx, rc, "GenerateStream")
	})
}
