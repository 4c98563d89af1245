package rest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// writeError is the REST front's one error writer: err as the REST client
// of dialect d sees it. The decode worker's own status and body when the
// error carries them (or a step's refusal of a stream), otherwise an error
// object of d with the status apierror chooses, whose message names the request id of
// the answer's X-Request-Id. A refusal's RetryInfo becomes Retry-After; a
// refusal because the server shuts down also closes the connection
// (HTTP/2: GOAWAY), so the client's retry finds another server.
func writeError(w http.ResponseWriter, d apierror.Dialect, err error) {
	st := withRequestID(status.Convert(err), w.Header().Get("X-Request-Id"))
	code := apierror.HTTPStatus(st)
	if d, ok := apierror.RetryDelay(st); ok {
		w.Header().Set("Retry-After", retryAfter(d))
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Connection", "close")
		}
	}
	if u := apierror.UpstreamDetail(st); u != nil && u.GetRelay() {
		if u.GetContentType() != "" {
			w.Header().Set("Content-Type", u.GetContentType())
		}
		w.WriteHeader(code)
		_, _ = w.Write(u.GetBody())
		return
	}
	writeAPIError(w, d, code, st.Message(), paramOf(st))
}

// retryAfter is a Retry-After value: whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// timedOut reports a read or write that hit its deadline (a slow client).
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyFailure is the answer to a request body that could not be read: 413
// past the cap, 408 when it did not come within server.read_timeout, 400
// otherwise; the message lacks the request id.
func bodyFailure(err error) (code int, message string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "request body too large"
	case timedOut(err):
		return http.StatusRequestTimeout, "request body not received within server.read_timeout"
	}
	return http.StatusBadRequest, "failed to read request body"
}

// writeOwnError writes an error the front decides before any request id
// is settled (405, 404), in dialect d: the client's valid X-Request-Id or
// a new one becomes the answer's, and ends the message.
func writeOwnError(w http.ResponseWriter, r *http.Request, d apierror.Dialect, code int, message string) {
	id := headers.RequestIDOrNew(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", id)
	writeAPIError(w, d, code, message+" (request_id: "+id+")", "")
}

// writeAPIError writes the error object of dialect d: OpenAI's
// {"error":{"message","type","param","code"}}, Anthropic's
// {"type":"error","error":{"type","message"}} (apierror.AppendError).
func writeAPIError(w http.ResponseWriter, d apierror.Dialect, code int, message, param string) {
	w.Header().Set("Content-Type", apierror.ContentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(apierror.AppendError(nil, d, code, message, param))
}

// withRequestID is st with " (request_id: id)" at the end of its message,
// unless it names id already (the service's errors do; the refusals of the
// admission, for one, do not). An empty id leaves st as it is.
func withRequestID(st *status.Status, id string) *status.Status {
	if id == "" || strings.Contains(st.Message(), "request_id: "+id) {
		return st
	}
	p := st.Proto()
	p.Message += " (request_id: " + id + ")"
	return status.FromProto(p)
}

// paramOf names the request field an error is about, if any: the first
// field of a validation error, or the param of a worker's error object.
func paramOf(st *status.Status) string {
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *validate.Violations:
			if len(d.GetViolations()) > 0 {
				return protovalidate.FieldPathString(d.GetViolations()[0].GetField())
			}
		case *coordinatorv1.UpstreamError:
			if d.GetParam() != "" {
				return d.GetParam()
			}
		}
	}
	return ""
}

// gatewayError is grpc-gateway's error handler: the errors of unary calls,
// and of a stream that could not start. The call's header metadata (a
// relayed worker answer's headers, ...) becomes headers as on a success.
func gatewayError(ctx context.Context, _ *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	if md, ok := runtime.ServerMetadataFromContext(ctx); ok {
		h := w.Header()
		for k, vs := range md.HeaderMD {
			if name, ok := headers.ResponseKey(k); ok {
				for _, v := range vs {
					h.Add(name, v)
				}
			}
		}
	}
	writeError(w, dialectOf(m), err)
}
