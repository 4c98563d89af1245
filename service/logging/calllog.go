package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// CallLog writes one "finished call" line per call, at callLevel of its
// code, with the fields of go-grpc-middleware's logging interceptor
// (protocol, grpc.component, grpc.service, grpc.method, grpc.method_type,
// peer.address, grpc.start_time, grpc.request.deadline, grpc.code,
// grpc.error, grpc.time_ms). Unlike that interceptor it builds the fields
// only for a line the logger takes: a call nobody logs (at log_level 1 and
// 2, every successful one) costs a clock read.
type CallLog struct{ log *slog.Logger }

// NewCallLog writes the lines to log.
func NewCallLog(log *slog.Logger) CallLog { return CallLog{log: log} }

// Unary is the unary interceptor.

func (l CallLog) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	l.finished(ctx, info.FullMethod, "unary", start, err)
	return resp, err
}

// Stream is the stream interceptor.
func (l CallLog) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	typ := "server_stream"
	switch {
	case info.IsClientStream && info.IsServerStream:
		typ = "bidi_stream"
	case info.IsClientStream:
		typ = "client_stream"
	}
	l.finished(ss.Context(), info.FullMethod, typ, start, err)
	return err
}

// finished writes the line of a call that started at start and ended with
// err, if the logger takes it.
func (l CallLog) finished(ctx context.Context, fullMethod, typ string, start time.Time, err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	code := status.Code(err)
	level := slog.Level(callLevel(code))
	if !l.log.Enabled(ctx, level) {
		return
	}
	service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	fields := make([]any, 0, 22)
	fields = append(fields, "protocol", "grpc", "grpc.component", "server", "grpc.service", service,
		"grpc.method", method, "grpc.method_type", typ)
	if p, ok := peer.FromContext(ctx); ok {
		fields = append(fields, "peer.address", p.Addr.String())
	}
	fields = append(fields, "grpc.start_time", start.Format(time.RFC3339))
	if d, ok := ctx.Deadline(); ok {
		fields = append(fields, "grpc.request.deadline", d.Format(time.RFC3339))
	}
	fields = append(fields, "grpc.code", code.String())
	if err != nil {
		fields = append(fields, "grpc.error", err.Error())
	}
	fields = append(fields, "grpc.time_ms", fmt.Sprint(float32(time.Since(start).Nanoseconds()/1000)/1000))
	l.log.Log(ctx, level, "finished call", fields...)
}

// callLevel logs finished calls at debug level when they succeed: the
// service writes the per-request line itself, with step timings.
func callLevel(code codes.Code) slog.Level {
	switch code {
	case codes.OK, codes.Canceled:
		return slog.LevelDebug
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
