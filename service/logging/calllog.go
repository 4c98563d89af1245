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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/headers"
)

// CallLog writes one "finished call" line per call, at callLevel of its
// code, with the fields of go-grpc-middleware's logging interceptor
// (protocol, grpc.component, grpc.service, grpc.method, grpc.method_type,
// peer.address, grpc.start_time, grpc.request.deadline, grpc.code,
// grpc.error, grpc.time_ms), and the request_id the call named. Unlike
// that interceptor it builds the fields only for a line the logger takes:
// a call nobody logs (at log_level 1 and 2, every successful one) costs a
// clock read.
type CallLog struct{ log *slog.Logger }

// NewCallLog writes the lines to log.
func NewCallLog(log *slog.Logger) CallLog { return CallLog{log: log} }

// Unary is the unary interceptor.
func (l CallLog) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	l.finished(ctx, info.FullMethod, "unary", start, err, req)
	return resp, err
}

// Stream is the stream interceptor.
func (l CallLog) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	var first *firstMessage
	if frontdoor.Of(ss.Context()) != frontdoor.REST { // the REST front's calls have their own lines
		first = &firstMessage{ServerStream: ss}
		ss = first
	}
	err := handler(srv, ss)
	l.streamFinished(ss, info, start, err, first)
	return err
}

// streamFinished writes a stream's line (finished), first its first
// message when kept. (Apart from Stream, whose frame every stream's
// goroutine holds.)
func (l CallLog) streamFinished(ss grpc.ServerStream, info *grpc.StreamServerInfo, start time.Time, err error, first *firstMessage) {
	typ := "server_stream"
	switch {
	case info.IsClientStream && info.IsServerStream:
		typ = "bidi_stream"
	case info.IsClientStream:
		typ = "client_stream"
	}
	var req any
	if first != nil {
		req = first.msg
	}
	l.finished(ss.Context(), info.FullMethod, typ, start, err, req)
}

// firstMessage is a stream that keeps the first message it received, for
// the call's line to name its request id.
type firstMessage struct {
	grpc.ServerStream
	msg any
}

func (s *firstMessage) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.msg == nil {
		s.msg = m
	}
	return err
}

// callRequestID is the request id a call named: its request message's
// request_id, else its x-request-id metadata; "" when it named none or an
// invalid one (the service then made up the id, which its own lines
// carry).
func callRequestID(ctx context.Context, req any) string {
	id := ""
	if r, ok := req.(interface{ GetRequestId() string }); ok {
		id = r.GetRequestId()
	}
	if id == "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-request-id"); len(v) > 0 {
			id = v[0]
		}
	}
	if !headers.ValidRequestID(id) {
		return ""
	}
	return id
}

// finished writes the line of a call that started at start and ended with
// err, if the logger takes it; req is its request message, if known.
func (l CallLog) finished(ctx context.Context, fullMethod, typ string, start time.Time, err error, req any) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	code := status.Code(err)
	level := slog.Level(callLevel(code))
	if !l.log.Enabled(ctx, level) {
		return
	}
	service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	fields := make([]any, 0, 24)
	if id := callRequestID(ctx, req); id != "" {
		fields = append(fields, "request_id", id)
	}
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
