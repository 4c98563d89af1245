package apierror_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/steps"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestFromErrorAndHTTPStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		code       codes.Code
		httpStatus int
		message    string
		relayBody  string
	}{
		{name: "client fault", err: fmt.Errorf("step \"render\": %w", legs.Invalidf("prompt must be a string or token array")),
			code: codes.InvalidArgument, httpStatus: 400, message: "prompt must be a string or token array (request_id: rid)"},
		{name: "render 422 passes through without its body", err: &gateway.StatusError{Leg: "render", StatusCode: 422, Body: []byte("bad tokens")},
			code: codes.InvalidArgument, httpStatus: 422, message: "render rejected the request: HTTP 422 (request_id: rid)"},
		{name: "prefill 429", err: &gateway.StatusError{Leg: "prefill", StatusCode: 429},
			code: codes.ResourceExhausted, httpStatus: 429, message: "prefill rejected the request: HTTP 429"},
		{name: "encode 503 is a bad gateway", err: &gateway.StatusError{Leg: "encode[1]", StatusCode: 503},
			code: codes.Unavailable, httpStatus: 502, message: "encode[1] failed: HTTP 503"},
		{name: "decode 404 is relayed", err: &gateway.StatusError{Leg: "decode", StatusCode: 404, Body: []byte(`{"e":1}`), ContentType: "application/json", Relay: true},
			code: codes.NotFound, httpStatus: 404, relayBody: `{"e":1}`},
		{name: "decode 503 is relayed too", err: &gateway.StatusError{Leg: "decode", StatusCode: 503, Relay: true},
			code: codes.Unavailable, httpStatus: 503},
		{name: "transport error", err: &gateway.TransportError{Leg: "prefill", Err: errors.New("connection refused")},
			code: codes.Unavailable, httpStatus: 502, message: "prefill unreachable (request_id: rid)"},
		{name: "prefill answer without the KV params (D26)", err: fmt.Errorf("step \"prefill\": %w",
			&pd.IncompleteKVError{Leg: "prefill", StatusCode: 200, Connector: "kv-nixl", Missing: []string{"remote_engine_id", "remote_host"}}),
			code: codes.Unavailable, httpStatus: 502,
			message: "prefill: answer lacks kv_transfer_params remote_engine_id, remote_host (kv-nixl) (request_id: rid)"},
		{name: "leg timeout", err: &gateway.TransportError{Leg: "decode", Err: timeoutErr{}},
			code: codes.DeadlineExceeded, httpStatus: 504, message: "decode timed out"},
		{name: "client cancel", err: fmt.Errorf("decode: %w", context.Canceled), code: codes.Canceled, httpStatus: 499},
		{name: "an image origin's fault is a bad gateway naming the image",
			err:  fmt.Errorf("step \"replace-media-urls\": downloading image 1: %w (in messages[0].content[2].image_url.url)", &media.Error{Reason: media.ErrStatus}),
			code: codes.Unavailable, httpStatus: 502, message: "downloading image 1: "},
		{name: "an image download that timed out too", err: fmt.Errorf("downloading image 0: %w", &media.Error{Reason: media.ErrTimeout}),
			code: codes.Unavailable, httpStatus: 502, message: "downloading image 0: "},
		{name: "anything else", err: errors.New("render returned 2 mm_hashes but expected 1"),
			code: codes.Internal, httpStatus: 502, message: "internal error (request_id: rid)"},
		{name: "a decode answer past its cap is a bad gateway naming the leg and the cap",
			err:  fmt.Errorf("decode: %w", &legs.TooLargeError{Cap: legs.Cap{Leg: "decode", Max: 256 << 20, Key: "gateway.max_answer_size"}}),
			code: codes.Unavailable, httpStatus: 502, message: "decode answer larger than 256 MiB (gateway.max_answer_size) (request_id: rid)"},
		{name: "the memory budget, for now: 429", err: fmt.Errorf("decode: %w", &membudget.ExhaustedError{Want: 1, Limit: 2}),
			code: codes.ResourceExhausted, httpStatus: 429, message: "memory budget: "},
		{name: "the memory budget, for ever: 413", err: &membudget.ExhaustedError{Want: 3, Limit: 2, Never: true},
			code: codes.ResourceExhausted, httpStatus: 413, message: "more than the whole budget"},
		{name: "a status passes through", err: status.Error(codes.InvalidArgument, "request_id: bad"), code: codes.InvalidArgument, httpStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := apierror.FromError(tt.err, "rid")
			assert.Equal(t, tt.code, st.Code())
			assert.Equal(t, tt.httpStatus, apierror.HTTPStatus(st))
			assert.Contains(t, st.Message(), tt.message)
			assert.NotContains(t, st.Message(), "bad tokens", "upstream bodies never reach the message")
			// The status must survive the trip through gRPC's wire form.
			roundTrip := status.Convert(st.Err())
			assert.Equal(t, tt.httpStatus, apierror.HTTPStatus(roundTrip))
			if u := apierror.UpstreamDetail(roundTrip); u != nil && u.GetRelay() {
				assert.Equal(t, tt.relayBody, string(u.GetBody()))
			} else {
				assert.Empty(t, tt.relayBody)
			}
		})
	}
}

func TestHTTPStatusOfPlainCodes(t *testing.T) {
	t.Parallel()
	tests := map[codes.Code]int{
		codes.OK: 200, codes.InvalidArgument: 400, codes.ResourceExhausted: 413, codes.Unimplemented: 501,
		codes.DeadlineExceeded: 504, codes.Unavailable: 503, codes.Internal: 502, codes.Unknown: 502,
	}
	for code, want := range tests {
		require.Equal(t, want, apierror.HTTPStatus(status.New(code, "x")), code.String())
	}
	assert.Equal(t, http.StatusBadGateway, apierror.HTTPStatus(status.New(codes.DataLoss, "x")))
}

// TestTransportFailures: a leg that got no usable answer is 504 /
// DEADLINE_EXCEEDED when it timed out (connect, response headers, a silent
// body) and 502 / UNAVAILABLE otherwise (refused, reset before or during the
// answer), with an UpstreamError naming the leg and no status.
func TestTransportFailures(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	dialTimeout := &url.Error{Op: "Post", URL: "http://gw/v1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}}
	tests := []struct {
		name       string
		err        error
		code       codes.Code
		httpStatus int
		message    string
	}{
		{name: "connection refused", err: &gateway.TransportError{Leg: "encode[0]", Err: refused},
			code: codes.Unavailable, httpStatus: 502, message: "encode[0] unreachable (request_id: rid)"},
		{name: "reset before headers", err: &gateway.TransportError{Leg: "prefill", Err: &url.Error{Op: "Post", URL: "http://gw", Err: io.EOF}},
			code: codes.Unavailable, httpStatus: 502, message: "prefill unreachable (request_id: rid)"},
		{name: "connect timeout", err: &gateway.TransportError{Leg: "prefill", Err: dialTimeout},
			code: codes.DeadlineExceeded, httpStatus: 504, message: "prefill timed out (request_id: rid)"},
		{name: "response header timeout", err: &gateway.TransportError{Leg: "render", Err: timeoutErr{}},
			code: codes.DeadlineExceeded, httpStatus: 504, message: "render timed out (request_id: rid)"},
		{name: "idle watchdog mid-stream", err: fmt.Errorf("decode: read event stream: %w", &gateway.TransportError{Leg: "decode", Err: gateway.ErrStreamIdle, InBody: true}),
			code: codes.DeadlineExceeded, httpStatus: 504, message: "decode answer stalled (request_id: rid)"},
		{name: "reset mid-body", err: fmt.Errorf("prefill: read answer: %w", &gateway.TransportError{Leg: "prefill", Err: io.ErrUnexpectedEOF, InBody: true}),
			code: codes.Unavailable, httpStatus: 502, message: "prefill answer cut off (request_id: rid)"},
		{name: "a status outside 100-599", err: &gateway.TransportError{Leg: "decode", Err: fmt.Errorf("%w: 999", gateway.ErrInvalidStatus)},
			code: codes.Unavailable, httpStatus: 502, message: "decode answered no HTTP status (request_id: rid)"},
		{name: "a silent render body wrapped again", err: &gateway.TransportError{Leg: "render", Err: fmt.Errorf("read answer: %w",
			&gateway.TransportError{Leg: "render", Err: gateway.ErrStreamIdle, InBody: true})},
			code: codes.DeadlineExceeded, httpStatus: 504, message: "render timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(apierror.FromError(tt.err, "rid").Err()) // through the wire form
			assert.Equal(t, tt.code, st.Code())
			assert.Equal(t, tt.httpStatus, apierror.HTTPStatus(st))
			assert.Contains(t, st.Message(), tt.message)
			u := apierror.UpstreamDetail(st)
			require.NotNil(t, u)
			var te *gateway.TransportError
			require.ErrorAs(t, tt.err, &te)
			assert.Equal(t, te.Leg, u.GetLeg())
			assert.Zero(t, u.GetStatusCode(), "no answer, no status")
		})
	}
	assert.Equal(t, http.StatusGatewayTimeout, apierror.HTTPStatus(apierror.FromError(fmt.Errorf("decode: %w", context.DeadlineExceeded), "rid")),
		"the request's own deadline")
}

// TestLegErrorMessages: a leg's 4xx OpenAI error object reaches the client
// inside ours, with the worker's status, message and param (compat §15
// D20); other bodies and 5xx bodies do not.
func TestLegErrorMessages(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 600) // 1200 bytes
	tests := []struct {
		name        string
		err         *gateway.StatusError
		httpStatus  int
		message     string
		workerMsg   string
		workerParam string
	}{
		{name: "prefill 400 error object",
			err:        &gateway.StatusError{Leg: "prefill", StatusCode: 400, Body: []byte(`{"error":{"message":"n must be at least 1","type":"BadRequestError","param":"n","code":400}}`)},
			httpStatus: 400, message: "prefill rejected the request: n must be at least 1 (request_id: rid)", workerMsg: "n must be at least 1", workerParam: "n"},
		{name: "render 404, vLLM's older shape",
			err:        &gateway.StatusError{Leg: "render", StatusCode: 404, Body: []byte(`{"object":"error","message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`)},
			httpStatus: 404, message: "render rejected the request: The model `nope` does not exist. (request_id: rid)", workerMsg: "The model `nope` does not exist."},
		{name: "encode 413, param not a string",
			err:        &gateway.StatusError{Leg: "encode[0]", StatusCode: 413, Body: []byte(` {"error":{"message":"too big","param":7}}`)},
			httpStatus: 413, message: "encode[0] rejected the request: too big (request_id: rid)", workerMsg: "too big"},
		{name: "decode 400 is relayed and named",
			err:        &gateway.StatusError{Leg: "decode", StatusCode: 400, Relay: true, Body: []byte(`{"error":{"message":"max_tokens too large","param":"max_tokens"}}`)},
			httpStatus: 400, message: "decode rejected the request: max_tokens too large (request_id: rid)", workerMsg: "max_tokens too large", workerParam: "max_tokens"},
		{name: "a long message is cut",
			err:        &gateway.StatusError{Leg: "prefill", StatusCode: 400, Body: []byte(`{"error":{"message":"` + long + `"}}`)},
			httpStatus: 400, message: "prefill rejected the request: " + strings.Repeat("é", 510) + "… (request_id: rid)", workerMsg: strings.Repeat("é", 510) + "…"},
		{name: "FastAPI's validation body is not an OpenAI error",
			err:        &gateway.StatusError{Leg: "prefill", StatusCode: 422, Body: []byte(`{"detail":[{"loc":["body","n"],"msg":"bad"}]}`)},
			httpStatus: 422, message: "prefill rejected the request: HTTP 422 (request_id: rid)"},
		{name: "an error string is not an error object",
			err:        &gateway.StatusError{Leg: "prefill", StatusCode: 400, Body: []byte(`{"error":"nope"}`)},
			httpStatus: 400, message: "prefill rejected the request: HTTP 400 (request_id: rid)"},
		{name: "an empty message is none",
			err:        &gateway.StatusError{Leg: "render", StatusCode: 400, Body: []byte(`{"error":{"message":""}}`)},
			httpStatus: 400, message: "render rejected the request: HTTP 400 (request_id: rid)"},
		{name: "plain text",
			err:        &gateway.StatusError{Leg: "render", StatusCode: 400, Body: []byte(`Bad Request`)},
			httpStatus: 400, message: "render rejected the request: HTTP 400 (request_id: rid)"},
		{name: "a 5xx body stays in the logs",
			err:        &gateway.StatusError{Leg: "prefill", StatusCode: 500, Body: []byte(`{"error":{"message":"CUDA out of memory"}}`)},
			httpStatus: 502, message: "prefill failed: HTTP 500 (request_id: rid)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(apierror.FromError(tt.err, "rid").Err()) // through the wire form
			assert.Equal(t, tt.message, st.Message())
			assert.Equal(t, tt.httpStatus, apierror.HTTPStatus(st))
			u := apierror.UpstreamDetail(st)
			require.NotNil(t, u)
			assert.Equal(t, tt.workerMsg, u.GetMessage())
			assert.Equal(t, tt.workerParam, u.GetParam())
			assert.Equal(t, tt.err.Relay, u.GetRelay())
		})
	}
}

func TestRefusalStatus(t *testing.T) {
	t.Parallel()
	r := &steps.Refusal{Status: 400, Type: "invalid_request_error", Code: "INVALID_REQUEST", Message: "stream is only supported in passthrough mode"}
	st := status.Convert(apierror.RefusalStatus(r, "async-broker", "rid").Err())
	assert.Equal(t, codes.InvalidArgument, st.Code())
	assert.Equal(t, "stream is only supported in passthrough mode (request_id: rid)", st.Message())
	assert.Equal(t, 400, apierror.HTTPStatus(st))
	u := apierror.UpstreamDetail(st)
	require.NotNil(t, u)
	assert.True(t, u.GetRelay())
	assert.Equal(t, "async-broker", u.GetLeg())
	assert.Equal(t, "application/json", u.GetContentType())
	assert.Equal(t, `{"error":{"message":"stream is only supported in passthrough mode","type":"invalid_request_error","code":"INVALID_REQUEST"}}`, string(u.GetBody()))
}
