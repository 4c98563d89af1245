package service

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

func newDirectChannel(t *testing.T, svc *echoService) *Channel {
	t.Helper()
	chain, err := NewInterceptors(slog.New(slog.DiscardHandler), ChainOptions{})
	require.NoError(t, err)
	return NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, chain, 1<<10)
}

func directRequest(id string) *coordinatorv1.GenerateStreamRequest {
	return &coordinatorv1.GenerateStreamRequest{RequestId: id,
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}}
}

func TestServeStreamSendsEachMessageOnTheCallersGoroutine(t *testing.T) {
	t.Parallel()
	ch := newDirectChannel(t, &echoService{events: 3})
	var got []string
	var headers []string
	header, err := ch.ServeStream(context.Background(), coordinatorv1.CoordinatorService_GenerateStream_FullMethodName, directRequest("s1"),
		func(m proto.Message, md metadata.MD) error {
			got = append(got, string(m.(*coordinatorv1.GenerateStreamResponse).GetOpenai().GetData()[0]))
			headers = append(headers, md.Get("x-request-id")...)
			return nil
		})
	assert.Equal(t, codes.Aborted, status.Code(err), "the handler's status")
	assert.Equal(t, []string{"a", "b", "c"}, got, "each message as sent, read before the handler reused it")
	assert.Equal(t, []string{"s1", "s1", "s1"}, headers, "the header the handler set, with every message")
	assert.Equal(t, []string{"s1"}, header.Get("x-request-id"))
}

func TestServeStreamValidatesAndEndsOnASendError(t *testing.T) {
	t.Parallel()
	svc := &echoService{events: 5}
	ch := newDirectChannel(t, svc)
	method := coordinatorv1.CoordinatorService_GenerateStream_FullMethodName
	sent := 0
	count := func(proto.Message, metadata.MD) error { sent++; return nil }

	_, err := ch.ServeStream(context.Background(), method, &coordinatorv1.GenerateStreamRequest{}, count)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "protovalidate runs on the stream's request")
	assert.Zero(t, sent)

	gone := errors.New("client gone")
	_, err = ch.ServeStream(context.Background(), method, directRequest("s2"), func(proto.Message, metadata.MD) error {
		sent++
		return gone
	})
	assert.ErrorIs(t, err, gone, "the send error ends the call")
	assert.Equal(t, 1, sent, "nothing is sent after it")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ch.ServeStream(ctx, method, directRequest("s3"), count)
	assert.Equal(t, codes.Canceled, status.Code(err))

	_, err = ch.ServeStream(context.Background(), "/coordinator.v1.CoordinatorService/Nope", directRequest("s4"), count)
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	big := directRequest("s5")
	big.GetOpenai().Json = make([]byte, 2<<10)
	_, err = ch.ServeStream(context.Background(), method, big, count)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the size limit")
}

// requestSeer records the request bytes its stream handler received.
type requestSeer struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	got []byte
}

func (s *requestSeer) GenerateStream(req *coordinatorv1.GenerateStreamRequest, _ grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	s.got = req.GetOpenai().GetJson()
	return nil
}

func TestServeStreamHandsTheRequestOverWhenAsked(t *testing.T) {
	t.Parallel()
	svc := &requestSeer{}
	chain, err := NewInterceptors(slog.New(slog.DiscardHandler), ChainOptions{})
	require.NoError(t, err)
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, chain, 1<<10)
	req := directRequest("s6")
	method := coordinatorv1.CoordinatorService_GenerateStream_FullMethodName
	none := func(proto.Message, metadata.MD) error { return nil }

	_, err = ch.ServeStream(context.Background(), method, req, none)
	require.NoError(t, err)
	assert.NotSame(t, &req.GetOpenai().Json[0], &svc.got[0], "copied by default")
	_, err = ch.ServeStream(WithHandOver(context.Background()), method, req, none)
	require.NoError(t, err)
	assert.Same(t, &req.GetOpenai().Json[0], &svc.got[0], "by reference when handed over")
}
