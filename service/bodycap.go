package service

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// DeclaredBodyTooLarge is the one rule for a body whose declared length
// (REST Content-Length, gRPC content-length metadata) is past limit: it is
// refused from the headers alone, before a byte of it is read. It returns
// the refusal's message, without the request id, and whether to refuse.
// A negative declared length (none declared) is never refused.
func DeclaredBodyTooLarge(declared, limit int64) (message string, refuse bool) {
	if declared <= limit {
		return "", false
	}
	return fmt.Sprintf("request body too large: content-length %d exceeds the limit of %d bytes", declared, limit), true
}

// headerContentLength is the HTTP/2 header a gRPC client may send with its
// call; grpc-go passes it on as call metadata.
const headerContentLength = "content-length"

// declaredLimit is the largest content-length metadata a call may declare
// on a server whose messages may be up to maxMessage bytes: one message and
// its 5-byte gRPC frame prefix.
func declaredLimit(maxMessage int) int64 { return int64(maxMessage) + 5 }

// refuseDeclared returns the RESOURCE_EXHAUSTED refusal of a call whose
// content-length metadata declares more than limit bytes (REST 413, as a
// body past the cap), with a BadRequest naming content-length; nil
// otherwise, a value that is not a length included. id is the request id
// the message carries, if read. It reads the one key it needs
// (ValueFromIncomingContext, any case) rather than a copy of the whole
// metadata: every call passes here, and that copy was three allocations.
func refuseDeclared(ctx context.Context, limit int64, id string) error {
	for _, v := range metadata.ValueFromIncomingContext(ctx, headerContentLength) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		msg, refuse := DeclaredBodyTooLarge(n, limit)
		if !refuse {
			continue
		}
		st := status.New(codes.ResourceExhausted, msg+" (request_id: "+requestID(ctx, id)+")")
		if ds, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       headerContentLength,
			Description: msg,
		}}}); err == nil {
			st = ds
		}
		return st.Err()
	}
	return nil
}

// declaredSizeUnary refuses a unary call that declares a body past limit.
// grpc-go has read a unary call's message (within the message limit) before
// any interceptor runs, so this only makes the answer the same as a
// stream's.
func declaredSizeUnary(limit int64) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var id string
		if r, ok := req.(interface{ GetRequestId() string }); ok {
			id = r.GetRequestId()
		}
		if err := refuseDeclared(ctx, limit, id); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// declaredSizeStream refuses a stream that declares a body past limit,
// before its first message is read: its request id is x-request-id's, or
// a new one.
func declaredSizeStream(limit int64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := refuseDeclared(ss.Context(), limit, ""); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
