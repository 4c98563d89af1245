package inproc

import (
	"context"
	"testing"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// sameBytesService records whether each call's request arrived as the
// caller's own bytes and with the caller's document.
type sameBytesService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	want   []byte
	same   chan bool
	parsed chan bool
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
	s.parsed <- ParsedBody(ctx, in.GetJson(), legs.FormatChat) != nil
}

func TestChannelHandsParsedRequestsOver(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m"}`)
	doc, err := requestbody.Parse(body, legs.FormatChat)
	require.NoError(t, err)
	svc := &sameBytesService{want: body, same: make(chan bool, 1), parsed: make(chan bool, 1)}
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, testChain(t), 1<<10)
	t.Cleanup(ch.Close)
	client := coordinatorv1.NewCoordinatorServiceClient(ch)
	in := &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: body}

	for _, handedOver := range []bool{true, false} {
		ctx := context.Background()
		if handedOver {
			ctx = WithParsedBody(ctx, doc)
		}
		resp, err := client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: in}})
		require.NoError(t, err)
		assert.Equal(t, handedOver, <-svc.same, "unary request by reference: %v", handedOver)
		assert.Equal(t, handedOver, <-svc.parsed, "unary document: %v", handedOver)
		assert.Equal(t, handedOver, &resp.GetOpenai().GetJson()[0] == &body[0], "unary reply by reference: %v", handedOver)

		stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: in}})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Error(t, err, "the stream ends")
		assert.Equal(t, handedOver, <-svc.same, "streamed request by reference: %v", handedOver)
		assert.Equal(t, handedOver, <-svc.parsed, "streamed document: %v", handedOver)
	}
}
