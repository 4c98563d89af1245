package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// floodService streams 64 KiB messages until a send fails, then reports
// when its context ended.
type floodService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	sends    int        // messages to send; 0 means until a send fails
	ctxEnded chan error // the handler's context.Cause once it ended
}

func (f *floodService) GenerateStream(_ *coordinatorv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	msg := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{
		Openai: &coordinatorv1.OpenAIEvents{Data: [][]byte{bytes.Repeat([]byte{'x'}, 64<<10)}}}}
	var err error
	for i := 0; f.sends == 0 || i < f.sends; i++ {
		if err = stream.Send(msg); err != nil {
			break
		}
	}
	if f.ctxEnded != nil {
		<-stream.Context().Done()
		f.ctxEnded <- context.Cause(stream.Context())
	}
	return err
}

// startFloodServer serves svc over loopback gRPC with the chain's send
// bound and returns a client with 64 KiB flow-control windows (no BDP
// growth), so a client that does not read blocks the server quickly.
func startFloodServer(t *testing.T, svc *floodService, timeout time.Duration) coordinatorv1.CoordinatorServiceClient {
	t.Helper()
	chain, err := NewInterceptors(slog.New(slog.DiscardHandler), ChainOptions{StreamWriteTimeout: timeout})
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(chain.Stream))
	coordinatorv1.RegisterCoordinatorServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return coordinatorv1.NewCoordinatorServiceClient(conn)
}

func streamRequest() *coordinatorv1.GenerateStreamRequest {
	return &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, Json: []byte(`{"stream":true}`)}}}
}

// TestSlowReaderIsCut: a client that stops reading a stream has the
// handler's context ended with errSlowReader about the stream write
// timeout after its window filled, and finds DEADLINE_EXCEEDED after the
// messages already sent when it reads again.
func TestSlowReaderIsCut(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	svc := &floodService{ctxEnded: make(chan error, 1)}
	client := startFloodServer(t, svc, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	stream, err := client.GenerateStream(ctx, streamRequest())
	require.NoError(t, err)

	var cause error
	select {
	case cause = <-svc.ctxEnded:
	case <-ctx.Done():
		t.Fatal("the stream of a client that does not read was never cut")
	}
	took := time.Since(start)
	assert.ErrorIs(t, cause, errSlowReader)
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+2*time.Second)

	var got int
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		got++
	}
	assert.Positive(t, got, "what was sent before the cut is delivered")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "server.stream_write_timeout")
}

// TestReaderThatKeepsUpIsNotCut: the bound is per message; a stream much
// longer than the timeout whose client reads is never cut. The reader's
// pauses are a sixteenth of the bound, so that only a stall of most of a
// second on a loaded machine would make one look like a slow reader (a
// fifth failed once at load 7.8).
func TestReaderThatKeepsUpIsNotCut(t *testing.T) {
	t.Parallel()
	svc := &floodService{sends: 200}
	const timeout = time.Second
	client := startFloodServer(t, svc, timeout)
	start := time.Now()
	stream, err := client.GenerateStream(context.Background(), streamRequest())
	require.NoError(t, err)
	var got int
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		got++
		if got%10 == 0 {
			time.Sleep(timeout / 16) // a slow reader, well within the bound: 20 pauses outlast it
		}
	}
	require.True(t, errors.Is(err, io.EOF), "%v", err)
	assert.Equal(t, 200, got)
	assert.Greater(t, time.Since(start), timeout, "the stream outlasted the bound")
}

// ctxStream is a server stream of a context; its sends block until
// unblock is closed.
type ctxStream struct {
	grpc.ServerStream
	ctx     context.Context
	unblock chan struct{}
}

func (s ctxStream) Context() context.Context { return s.ctx }
func (s ctxStream) SendMsg(any) error        { <-s.unblock; return nil }

// TestACancelledStreamEndsWithItsHandler: a call cancelled otherwise than
// by a slow reader (its client went away, the drain ended it) returns only
// once its handler did, so the handler's log line and metrics come before
// the client's status and the drain waits for them; a handler whose send
// stays blocked is left behind after the stream write timeout.
func TestACancelledStreamEndsWithItsHandler(t *testing.T) {
	t.Run("the handler returns", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		gate, returned := make(chan struct{}), make(chan error, 1)
		handler := func(_ any, ss grpc.ServerStream) error {
			<-ss.Context().Done()
			<-gate // still logging, counting
			return status.FromContextError(ss.Context().Err()).Err()
		}
		go func() { returned <- runBounded(nil, ctxStream{ctx: ctx}, handler, time.Hour) }()
		cancel()
		select {
		case err := <-returned:
			t.Fatalf("returned before its handler: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(gate)
		assert.Equal(t, codes.Canceled, status.Code(<-returned))
	})
	t.Run("a send stays blocked", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		unblock := make(chan struct{})
		defer close(unblock)
		sending := make(chan struct{})
		handler := func(_ any, ss grpc.ServerStream) error {
			close(sending)
			return ss.SendMsg(nil)
		}
		returned := make(chan error, 1)
		go func() {
			returned <- runBounded(nil, ctxStream{ctx: ctx, unblock: unblock}, handler, 100*time.Millisecond)
		}()
		<-sending
		cancel()
		assert.Equal(t, codes.Canceled, status.Code(<-returned))
	})
}
