package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/inproc"
)

// panicService panics on a request id "panic" and answers any other.
type panicService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
}

func (panicService) Generate(_ context.Context, req *coordinatorv1.GenerateRequest) (*coordinatorv1.GenerateResponse, error) {
	if req.GetRequestId() == "panic" {
		panic("boom")
	}
	return &coordinatorv1.GenerateResponse{}, nil
}

func (panicService) GenerateStream(*coordinatorv1.GenerateStreamRequest, grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	return nil
}

// TestInterceptorsRunInProcess checks the server's own chain through the
// in-process Channel (inproc's tests run a stand-in of it): protovalidate
// and panic recovery run on unary calls, protovalidate on streams.
func TestInterceptorsRunInProcess(t *testing.T) {
	t.Parallel()
	chain, err := NewInterceptors(slog.New(slog.DiscardHandler), ChainOptions{})
	require.NoError(t, err)
	ch := inproc.NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, panicService{}, inproc.Options{Unary: chain.Unary, Stream: chain.Stream, MaxRecv: 1 << 10})
	t.Cleanup(ch.Close)
	client := coordinatorv1.NewCoordinatorServiceClient(ch)
	chat := func(id string) *coordinatorv1.GenerateRequest {
		return &coordinatorv1.GenerateRequest{RequestId: id, Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{}`)}}}
	}
	tests := []struct {
		name string
		req  *coordinatorv1.GenerateRequest
		code codes.Code
	}{
		{name: "a valid request is served", req: chat("ok"), code: codes.OK},
		{name: "protovalidate runs", req: chat("bad id!"), code: codes.InvalidArgument},
		{name: "recovery runs", req: chat("panic"), code: codes.Internal},
	}
	for _, tt := range tests {
		_, err := client.Generate(context.Background(), tt.req)
		assert.Equal(t, tt.code, status.Code(err), tt.name)
	}
	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "protovalidate runs on the stream's request")
}
