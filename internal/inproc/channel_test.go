package inproc

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"buf.build/go/protovalidate"
	grpcvalidate "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoService answers with what it received, to check the channel.
type echoService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	events  int
	blocked chan struct{} // if set, the stream waits for cancellation after one message
	ended   chan error    // if set, gets what GenerateStream returns
}

func (e *echoService) Generate(ctx context.Context, req *coordinatorv1.GenerateRequest) (*coordinatorv1.GenerateResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if req.GetRequestId() == "panic" {
		panic("boom")
	}
	if req.GetRequestId() == "fail" {
		return nil, errors.New("plain error")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", "1"))
	grpc.SetTrailer(ctx, metadata.Pairs("x-t", "2"))
	body := append([]byte(nil), req.GetOpenai().GetJson()...)
	req.GetOpenai().Json[0] = 'X' // the handler owns its copy
	return &coordinatorv1.GenerateResponse{RequestId: md.Get("x-tenant")[0], Output: &coordinatorv1.GenerateResponse_Openai{
		Openai: &coordinatorv1.OpenAIResponse{Json: body}}}, nil
}

func (e *echoService) GenerateStream(req *coordinatorv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) (err error) {
	if e.ended != nil {
		defer func() { e.ended <- err }()
	}
	_ = stream.SetHeader(metadata.Pairs("x-request-id", req.GetRequestId()))
	events := &coordinatorv1.OpenAIEvents{}
	msg := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{Openai: events}}
	for i := range e.events {
		events.Data = [][]byte{{byte('a' + i)}} // reused: the channel must have copied the previous one
		if err := stream.Send(msg); err != nil {
			return err
		}
		if e.blocked != nil {
			<-stream.Context().Done()
			close(e.blocked)
			return stream.Context().Err()
		}
	}
	return status.Error(codes.Aborted, "done with an error")
}

func newTestChannel(t *testing.T, svc *echoService, maxRecv int) coordinatorv1.CoordinatorServiceClient {
	t.Helper()
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, testOptions(t, maxRecv))
	t.Cleanup(ch.Close)
	return coordinatorv1.NewCoordinatorServiceClient(ch)
}

// testOptions serve with the part of the server's chain
// (service.NewInterceptors) the tests look for, panic recovery then
// protovalidate, and hand over the messages of a call whose context
// withHandOver made, as the service does the REST front's.
func testOptions(t *testing.T, maxRecv int) Options {
	t.Helper()
	validator, err := protovalidate.New()
	require.NoError(t, err)
	recoverOpt := recovery.WithRecoveryHandlerContext(func(context.Context, any) error {
		return status.Error(codes.Internal, "internal error")
	})
	recoverUnary, validateUnary := recovery.UnaryServerInterceptor(recoverOpt), grpcvalidate.UnaryServerInterceptor(validator)
	recoverStream, validateStream := recovery.StreamServerInterceptor(recoverOpt), grpcvalidate.StreamServerInterceptor(validator)
	return Options{
		MaxRecv: maxRecv,
		Pass:    passByReference,
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return recoverUnary(ctx, req, info, func(ctx context.Context, req any) (any, error) {
				return validateUnary(ctx, req, info, handler)
			})
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return recoverStream(srv, ss, info, func(srv any, ss grpc.ServerStream) error {
				return validateStream(srv, ss, info, handler)
			})
		},
	}
}

func chat(id, body string) *coordinatorv1.GenerateRequest {
	return &coordinatorv1.GenerateRequest{RequestId: id, Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(body)}}}
}

func TestChannelUnary(t *testing.T) {
	t.Parallel()
	client := newTestChannel(t, &echoService{}, 1<<10)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "t1")
	var header, trailer metadata.MD
	req := chat("ok", `{"a":1}`)
	resp, err := client.Generate(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, "t1", resp.GetRequestId(), "outgoing metadata arrives as incoming")
	assert.Equal(t, `{"a":1}`, string(resp.GetOpenai().GetJson()))
	assert.Equal(t, `{"a":1}`, string(req.GetOpenai().GetJson()), "the caller's message is not touched")
	assert.Equal(t, []string{"1"}, header.Get("x-h"))
	assert.Equal(t, []string{"2"}, trailer.Get("x-t"))
}

func TestChannelUnaryErrors(t *testing.T) {
	t.Parallel()
	client := newTestChannel(t, &echoService{}, 64)
	tests := []struct {
		name string
		req  *coordinatorv1.GenerateRequest
		code codes.Code
	}{
		{name: "protovalidate runs", req: chat("bad id!", `{}`), code: codes.InvalidArgument},
		{name: "recovery runs", req: chat("panic", `{}`), code: codes.Internal},
		{name: "plain errors are Unknown", req: chat("fail", `{}`), code: codes.Unknown},
		{name: "size limit", req: chat("ok", `{"pad":"`+string(make([]byte, 100))+`"}`), code: codes.ResourceExhausted},
	}
	for _, tt := range tests {
		_, err := client.Generate(context.Background(), tt.req)
		assert.Equal(t, tt.code, status.Code(err), tt.name)
	}
}

func TestChannelStream(t *testing.T) {
	t.Parallel()
	client := newTestChannel(t, &echoService{events: 3}, 1<<10)
	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{RequestId: "s1",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
	require.NoError(t, err)
	md, err := stream.Header()
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, md.Get("x-request-id"))
	var got []string
	for {
		msg, err := stream.Recv()
		if err != nil {
			assert.Equal(t, codes.Aborted, status.Code(err), "the handler's status ends the stream")
			assert.NotErrorIs(t, err, io.EOF)
			break
		}
		got = append(got, string(msg.GetOpenai().GetData()[0]))
	}
	assert.Equal(t, []string{"a", "b", "c"}, got, "each message was copied before the handler reused it")
}

func TestChannelStreamValidatesAndCancels(t *testing.T) {
	t.Parallel()
	svc := &echoService{events: 5, blocked: make(chan struct{})}
	client := newTestChannel(t, svc, 1<<10)

	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "protovalidate runs on the stream's request")

	ctx, cancel := context.WithCancel(context.Background())
	stream, err = client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err)
	cancel()
	select {
	case <-svc.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not see the cancellation")
	}
	_, err = stream.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err))
}

// TestChannelStreamAbandoned checks a caller that stops receiving and
// cancels leaves no handler behind: the handler, suspended in a send, runs
// to its end with that send failing (goleak checks its goroutine is gone).
func TestChannelStreamAbandoned(t *testing.T) {
	t.Parallel()
	svc := &echoService{events: 100, ended: make(chan error, 1)}
	client := newTestChannel(t, svc, 1<<10)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "a", string(msg.GetOpenai().GetData()[0]))
	cancel()
	select {
	case err := <-svc.ended:
		assert.Equal(t, codes.Canceled, status.Code(err), "the send after the cancellation failed")
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned handler did not end")
	}
}

// TestChannelStreamHeaderRunsTheHandler checks Header returns the header
// the handler set with its first message, and that message still arrives.
func TestChannelStreamHeaderRunsTheHandler(t *testing.T) {
	t.Parallel()
	client := newTestChannel(t, &echoService{events: 1}, 1<<10)
	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{RequestId: "h1",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
	require.NoError(t, err)
	md, err := stream.Header()
	require.NoError(t, err)
	assert.Equal(t, []string{"h1"}, md.Get("x-request-id"))
	msg, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "a", string(msg.GetOpenai().GetData()[0]), "the message sent with the header is not lost")
	_, err = stream.Recv()
	assert.Equal(t, codes.Aborted, status.Code(err))
	_, err = stream.Recv()
	assert.Equal(t, codes.Aborted, status.Code(err), "the end is returned again")
}

// TestChannelReusesRunners checks a stream's handler runs on a runner kept
// from the stream before (its stack grown), and Close stops the idle ones.
func TestChannelReusesRunners(t *testing.T) {
	t.Parallel()
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, &echoService{events: 2}, testOptions(t, 1<<10))
	client := coordinatorv1.NewCoordinatorServiceClient(ch)
	var first *runner
	for i := range 3 {
		stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
		require.NoError(t, err)
		for err == nil {
			_, err = stream.Recv()
		}
		assert.Equal(t, codes.Aborted, status.Code(err))
		ch.mu.Lock()
		require.Len(t, ch.idle, 1, "stream %d gave its runner back", i)
		if first == nil {
			first = ch.idle[0]
		}
		assert.Same(t, first, ch.idle[0], "stream %d ran on the first stream's runner", i)
		ch.mu.Unlock()
	}
	ch.Close()
	assert.Empty(t, ch.idle)
}

// TestChannelKeepsAtMostItsBound checks that streams run at once beyond
// the Channel's bound leave only the bound's runners idle once they end.
func TestChannelKeepsAtMostItsBound(t *testing.T) {
	t.Parallel()
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, &echoService{events: 2}, testOptions(t, 1<<10))
	t.Cleanup(ch.Close)
	ch.maxIdle = 2
	client := coordinatorv1.NewCoordinatorServiceClient(ch)
	var err error
	var streams []grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]
	for range 5 { // each holds its runner, suspended in its second send
		stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.NoError(t, err)
		streams = append(streams, stream)
	}
	assert.Zero(t, ch.IdleRunners(), "five streams run on five runners")
	for _, stream := range streams {
		for err == nil {
			_, err = stream.Recv()
		}
		assert.Equal(t, codes.Aborted, status.Code(err))
		err = nil
	}
	assert.Equal(t, 2, ch.IdleRunners(), "the bound's runners are kept, the others stopped")
}

// TestHandedOverStreamsEnd checks the streams of a caller that hands its
// messages over (HandOver): a message is passed by reference, the caller's
// until its next RecvMsg (the handler then reuses it), and HandOver.End
// ends a stream whose caller stopped receiving, on the caller's goroutine.
func TestHandedOverStreamsEnd(t *testing.T) {
	t.Parallel()
	svc := &echoService{events: 100, ended: make(chan error, 1)}
	client := newTestChannel(t, svc, 1<<10)
	ctx, h := withHandOver(context.Background())
	stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: 1, Json: []byte(`{}`)}}})
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "a", string(first.GetOpenai().GetData()[0]))
	second, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "b", string(second.GetOpenai().GetData()[0]))
	assert.Equal(t, "b", string(first.GetOpenai().GetData()[0]), "the first message was the handler's own, reused")

	h.End()
	select {
	case err := <-svc.ended:
		assert.Equal(t, codes.Canceled, status.Code(err), "the send after End failed")
	default:
		t.Fatal("End returned before the handler ended")
	}
	_, err = stream.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err))
	h.End() // again: nothing left to end
}
