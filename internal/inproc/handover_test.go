package inproc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// sameBytesService records whether each call's request arrived as the
// caller's own bytes.
type sameBytesService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	want []byte
	same chan bool
}

func (s *sameBytesService) Generate(ctx context.Context, req *coordinatorv1.GenerateRequest) (*coordinatorv1.GenerateResponse, error) {
	s.record(ctx, req.GetOpenai())
	return &coordinatorv1.GenerateResponse{Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{Json: s.want}}}, nil
}

func (s *sameBytesService) GenerateStream(req *coordinatorv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	s.record(stream.Context(), req.GetOpenai())
	return nil
}

func (s *sameBytesService) record(ctx context.Context, in *coordinatorv1.OpenAIRequest) {
	s.same <- &in.GetJson()[0] == &s.want[0]
}

// withHandOver returns ctx for calls whose messages the test hands over,
// as the REST front does its own.
func withHandOver(ctx context.Context) (context.Context, *HandOver) {
	h := new(HandOver)
	return WithHandOver(ctx, h), h
}

// passByReference hands the test service's messages over by reference,
// as the service's Options.Pass does.
func passByReference(dst, src proto.Message) bool {
	switch d := dst.(type) {
	case *coordinatorv1.GenerateRequest:
		d.Input = src.(*coordinatorv1.GenerateRequest).Input
	case *coordinatorv1.GenerateStreamRequest:
		d.Input = src.(*coordinatorv1.GenerateStreamRequest).Input
	case *coordinatorv1.GenerateResponse:
		d.Output = src.(*coordinatorv1.GenerateResponse).Output
	case *coordinatorv1.GenerateStreamResponse:
		d.Chunk = src.(*coordinatorv1.GenerateStreamResponse).Chunk
	default:
		return false
	}
	return true
}

func TestChannelHandsMessagesOver(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m"}`)
	svc := &sameBytesService{want: body, same: make(chan bool, 1)}
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, testOptions(t, 1<<10))
	t.Cleanup(ch.Close)
	client := coordinatorv1.NewCoordinatorServiceClient(ch)
	in := &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: body}

	for _, handedOver := range []bool{true, false} {
		ctx := context.Background()
		if handedOver {
			ctx, _ = withHandOver(ctx)
		}
		resp, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: in}})
		require.NoError(t, err)
		assert.Equal(t, handedOver, <-svc.same, "unary request by reference: %v", handedOver)
		assert.Equal(t, handedOver, &resp.GetOpenai().GetJson()[0] == &body[0], "unary reply by reference: %v", handedOver)

		stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: in}})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Error(t, err, "the stream ends")
		assert.Equal(t, handedOver, <-svc.same, "streamed request by reference: %v", handedOver)
	}
}
