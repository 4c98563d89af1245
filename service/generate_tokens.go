package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/tokens"
)

// generateTokens serves a tokens input of Generate: the request becomes a
// vLLM /inference/v1/generate body and runs through the pipeline like a REST
// request to that path; the decode worker's answer becomes a TokensResponse.
func (c *Coordinator) generateTokens(ctx context.Context, id, legID string, in *coordinatorv1.TokensRequest) (*coordinatorv1.GenerateResponse, error) {
	rc := tokens.NewRequestContext(ctx, id, legID, in, false)
	c.routeLegs(ctx, rc)
	sink := tokens.NewUnarySink(in, c.versionCheck(ctx, rc))
	rc.Sink = sink
	if err := c.run(ctx, rc, "Generate"); err != nil {
		return nil, err
	}
	answer := sink.Answer()
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
	rc := tokens.NewRequestContext(ctx, id, legID, in, true)
	c.routeLegs(ctx, rc)
	rc.Sink = tokens.NewStreamSink(stream, c.versionCheck(ctx, rc))
	return c.run(ctx, rc, "GenerateStream")
}
