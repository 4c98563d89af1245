package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
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

// callLines runs one call of each outcome through CallLog at level and
// returns the lines it wrote, decoded.
func callLines(t *testing.T, level slog.Level, err error, stream bool) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	l := CallLog{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))}
	if stream {
		info := &grpc.StreamServerInfo{FullMethod: "/coordinator.v1.CoordinatorService/GenerateStream", IsServerStream: true}
		got := l.Stream(nil, ctxStream{ctx: context.Background()}, info, func(any, grpc.ServerStream) error { return err })
		assert.Equal(t, err, got, "the handler's error comes back as it was")
	} else {
		info := &grpc.UnaryServerInfo{FullMethod: "/coordinator.v1.CoordinatorService/Generate"}
		_, got := l.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, err })
		assert.Equal(t, err, got)
	}
	var lines []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		lines = append(lines, m)
	}
	return lines
}

func TestCallLogWritesTheFinishedCallLine(t *testing.T) {
	t.Parallel()
	lines := callLines(t, slog.LevelDebug, nil, false)
	require.Len(t, lines, 1)
	l := lines[0]
	assert.Equal(t, "finished call", l["msg"])
	assert.Equal(t, "DEBUG", l["level"])
	for key, want := range map[string]string{"protocol": "grpc", "grpc.component": "server", "grpc.service": "coordinator.v1.CoordinatorService",
		"grpc.method": "Generate", "grpc.method_type": "unary", "grpc.code": "OK"} {
		assert.Equal(t, want, l[key], key)
	}
	assert.Contains(t, l, "grpc.start_time")
	assert.Contains(t, l, "grpc.time_ms")
	assert.NotContains(t, l, "grpc.error")

	lines = callLines(t, slog.LevelDebug, status.Error(codes.NotFound, "gone"), true)
	require.Len(t, lines, 1)
	assert.Equal(t, "INFO", lines[0]["level"], "a client's fault at info")
	assert.Equal(t, "server_stream", lines[0]["grpc.method_type"])
	assert.Equal(t, "NotFound", lines[0]["grpc.code"])
	assert.Equal(t, "rpc error: code = NotFound desc = gone", lines[0]["grpc.error"])
}

func TestCallLogWritesOnlyWhatTheLevelTakes(t *testing.T) {
	t.Parallel()
	assert.Empty(t, callLines(t, slog.LevelWarn, nil, false), "success is debug")
	assert.Empty(t, callLines(t, slog.LevelWarn, status.Error(codes.InvalidArgument, "bad"), false), "a client's fault is info")
	lines := callLines(t, slog.LevelWarn, status.Error(codes.Internal, "boom"), false)
	require.Len(t, lines, 1)
	assert.Equal(t, "ERROR", lines[0]["level"])
}

// Not parallel: AllocsPerRun counts the whole process's allocations.
func TestCallLogCostsNothingUnlogged(t *testing.T) {
	l := CallLog{log: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	info := &grpc.UnaryServerInfo{FullMethod: "/coordinator.v1.CoordinatorService/Generate"}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	allocs := testing.AllocsPerRun(100, func() { _, _ = l.Unary(context.Background(), nil, info, ok) })
	assert.Zero(t, allocs, "a call nobody logs builds no fields")
}

// ctxStream is a grpc.ServerStream with only a context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// msgStream is a stream whose one message is msg.
type msgStream struct {
	ctxStream
	msg *coordinatorv1.GenerateStreamRequest
}

func (s msgStream) RecvMsg(m any) error {
	proto.Merge(m.(*coordinatorv1.GenerateStreamRequest), s.msg)
	return nil
}

func TestCallLogNamesTheRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := NewCallLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	bad := status.Error(codes.InvalidArgument, "bad")
	unary := &grpc.UnaryServerInfo{FullMethod: "/coordinator.v1.CoordinatorService/Generate"}
	stream := &grpc.StreamServerInfo{FullMethod: "/coordinator.v1.CoordinatorService/GenerateStream", IsServerStream: true}
	failUnary := func(context.Context, any) (any, error) { return nil, bad }
	failStream := func(_ any, ss grpc.ServerStream) error {
		var m coordinatorv1.GenerateStreamRequest
		require.NoError(t, ss.RecvMsg(&m))
		return bad
	}
	withHeader := func(id string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-request-id", id))
	}

	_, _ = l.Unary(context.Background(), &coordinatorv1.GenerateRequest{RequestId: "from-message"}, unary, failUnary)
	_, _ = l.Unary(withHeader("from-header"), &coordinatorv1.GenerateRequest{}, unary, failUnary)
	_ = l.Stream(nil, msgStream{ctxStream{ctx: context.Background()}, &coordinatorv1.GenerateStreamRequest{RequestId: "stream-message"}}, stream, failStream)
	_ = l.Stream(nil, msgStream{ctxStream{ctx: withHeader("stream-header")}, &coordinatorv1.GenerateStreamRequest{}}, stream, failStream)
	_, _ = l.Unary(withHeader("not valid!"), nil, unary, failUnary)

	var ids []any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		ids = append(ids, m["request_id"])
	}
	assert.Equal(t, []any{"from-message", "from-header", "stream-message", "stream-header", nil}, ids)
}
