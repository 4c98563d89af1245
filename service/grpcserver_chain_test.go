package service

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
)

// TestChainsRunInOrderEveryCall checks the kept chains (chainUnary,
// chainStream) run every interceptor, outermost first, at each call, and
// that a unary chain is kept per server: two servers of one method reach
// their own handler.
func TestChainsRunInOrderEveryCall(t *testing.T) {
	t.Parallel()
	var trace strings.Builder
	unaryMark := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			trace.WriteString(name)
			return h(ctx, req)
		}
	}
	unary := chainUnary(unaryMark("a"), unaryMark("b"), unaryMark("c"))
	for _, server := range []string{"s1", "s2", "s1", "s2"} {
		info := &grpc.UnaryServerInfo{FullMethod: "/m", Server: server}
		handler := func(context.Context, any) (any, error) { return server, nil }
		got, err := unary(context.Background(), nil, info, handler)
		assert.NoError(t, err)
		assert.Equal(t, server, got, "the server's own handler")
	}
	assert.Equal(t, "abcabcabcabc", trace.String())

	trace.Reset()
	streamMark := func(name string) grpc.StreamServerInterceptor {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			trace.WriteString(name)
			return h(srv, ss)
		}
	}
	stream := chainStream(streamMark("x"), streamMark("y"))
	var servers []any
	handler := func(srv any, _ grpc.ServerStream) error { servers = append(servers, srv); return nil }
	for _, srv := range []string{"s1", "s2"} {
		assert.NoError(t, stream(srv, nil, &grpc.StreamServerInfo{FullMethod: "/s"}, handler))
	}
	assert.Equal(t, "xyxy", trace.String())
	assert.Equal(t, []any{"s1", "s2"}, servers, "a stream's server is its call's")
}
