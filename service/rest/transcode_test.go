package rest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"buf.build/go/protovalidate"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// fakeClient is the CoordinatorService as the gateway sees it: it records
// the requests and answers with what the test set.
type fakeClient struct {
	header   metadata.MD
	unary    *coordinatorv1.GenerateResponse
	unaryErr error
	events   []*coordinatorv1.GenerateStreamResponse
	end      error // the stream's end: nil is io.EOF

	gotUnary  *coordinatorv1.GenerateRequest
	gotStream *coordinatorv1.GenerateStreamRequest
	gotMD     metadata.MD

	count    *coordinatorv1.CountTokensResponse // CountTokens' answer (count_test.go)
	gotCount *coordinatorv1.CountTokensRequest
}

func (f *fakeClient) Generate(ctx context.Context, in *coordinatorv1.GenerateRequest, opts ...grpc.CallOption) (*coordinatorv1.GenerateResponse, error) {
	f.gotUnary = in
	f.gotMD, _ = metadata.FromOutgoingContext(ctx)
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok {
			*h.HeaderAddr = f.header
		}
	}
	return f.unary, f.unaryErr
}

func (f *fakeClient) GenerateStream(ctx context.Context, in *coordinatorv1.GenerateStreamRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse], error) {
	f.gotStream = in
	f.gotMD, _ = metadata.FromOutgoingContext(ctx)
	return &fakeStream{ctx: ctx, f: f}, nil
}

func (*fakeClient) GetRequest(context.Context, *coordinatorv1.GetRequestRequest, ...grpc.CallOption) (*coordinatorv1.GetRequestResponse, error) {
	return nil, status.Error(codes.Unimplemented, "no")
}

func (*fakeClient) DeleteRequest(context.Context, *coordinatorv1.DeleteRequestRequest, ...grpc.CallOption) (*coordinatorv1.DeleteRequestResponse, error) {
	return nil, status.Error(codes.Unimplemented, "no")
}

type fakeStream struct {
	grpc.ClientStream
	ctx  context.Context
	f    *fakeClient
	sent int
}

func (s *fakeStream) Recv() (*coordinatorv1.GenerateStreamResponse, error) {
	if s.sent < len(s.f.events) {
		s.sent++
		return s.f.events[s.sent-1], nil
	}
	if s.f.end != nil {
		return nil, s.f.end
	}
	return nil, io.EOF
}

func (s *fakeStream) Header() (metadata.MD, error) { return s.f.header, nil }
func (s *fakeStream) Trailer() metadata.MD         { return nil }
func (s *fakeStream) Context() context.Context     { return s.ctx }

func events(data ...string) *coordinatorv1.GenerateStreamResponse {
	e := &coordinatorv1.OpenAIEvents{}
	for _, d := range data {
		e.Data = append(e.Data, []byte(d))
	}
	return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{Openai: e}}
}

func fakeFront(t *testing.T, f *fakeClient) *Handler {
	t.Helper()
	return testHandler(t, f, Options{StreamWriteTimeout: time.Minute})
}

func postTo(h http.Handler, path, body string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// relayed is the status of a decode worker's 422, relayed.
func relayed(t *testing.T) *status.Status {
	t.Helper()
	st, err := status.New(codes.InvalidArgument, "decode rejected the request: HTTP 422 (request_id: rid-1)").WithDetails(&coordinatorv1.UpstreamError{
		Leg: "decode", StatusCode: 422, ContentType: "application/json", Body: []byte(`{"detail":"worker's own"}`), Relay: true,
	})
	require.NoError(t, err)
	return st
}

// The request the gateway makes of the front's: the body as openai.json,
// the endpoint of the route and the request id; the client's query and
// Content-Type count for nothing, its headers travel as metadata.
func TestTranscodeBuildsTheRequest(t *testing.T) {
	t.Parallel()
	f := &fakeClient{unary: &coordinatorv1.GenerateResponse{Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{
		StatusCode: 200, ContentType: "application/json", Json: []byte(`{"answer":1}`)}}}}
	h := fakeFront(t, f)
	const body = `{"model":"m","prompt":"a=1&b=2"}`
	w := postTo(h, "/v1/completions?request_id=evil&openai.endpoint=ENDPOINT_GENERATE&openai.json=eA", body, http.Header{
		"X-Request-Id": {"rid-1"}, "Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"text/event-stream"}, "X-Custom": {"c"},
	})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `{"answer":1}`, w.Body.String())
	want := &coordinatorv1.GenerateRequest{RequestId: "rid-1", Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, Json: []byte(body)}}}
	assert.True(t, proto.Equal(want, f.gotUnary), "got %v", f.gotUnary)
	assert.Equal(t, []string{"c"}, f.gotMD.Get("x-custom"))
	assert.Equal(t, []string{"text/event-stream"}, f.gotMD.Get("accept"), "the client's Accept, as it sent it")

	w = postTo(h, "/inference/v1/generate?x=1", `{"stream":true}`, http.Header{"X-Request-Id": {"rid-2"}})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	wantStream := &coordinatorv1.GenerateStreamRequest{RequestId: "rid-2", Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_GENERATE, Json: []byte(`{"stream":true}`)}}}
	assert.True(t, proto.Equal(wantStream, f.gotStream), "got %v", f.gotStream)
}

func TestDecoderTakesTheFrontsBytes(t *testing.T) {
	t.Parallel()
	data := []byte(`{"a":1}`)
	var got []byte
	require.NoError(t, rawJSON{}.NewDecoder(&bodyReader{data: data}).Decode(&got))
	assert.Same(t, &data[0], &got[0], "no copy")
	require.NoError(t, rawJSON{}.NewDecoder(strings.NewReader(`{"b":2}`)).Decode(&got))
	assert.Equal(t, `{"b":2}`, string(got), "any other reader is read")
	assert.Error(t, rawJSON{}.NewDecoder(strings.NewReader(`{}`)).Decode(new(string)))
	r := &bodyReader{data: []byte("abc")}
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(b))
	assert.Empty(t, r.Bytes(), "consumed")
}

// A stream's messages become server-sent events, byte for byte, flushed
// with the stream's headers and the worker's; an error after the first
// event is the final error event, naming the request id (D19).
func TestTranscodeStreamsEvents(t *testing.T) {
	t.Parallel()
	f := &fakeClient{
		header: metadata.Pairs("server-timing", "render;dur=1.0", "x-sim-pool", "decode", "x-request-id", "rid-1", "grpc-x", "no"),
		events: []*coordinatorv1.GenerateStreamResponse{events(`{"a":1}`), events("x\ny", `{"b":2}`)},
		end:    status.Error(codes.Unavailable, "decode answer cut off"),
	}
	w := postTo(fakeFront(t, f), "/v1/chat/completions", `{"stream":true}`, http.Header{"X-Request-Id": {"rid-1"}})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "data: {\"a\":1}\n\ndata: x\ndata: y\n\ndata: {\"b\":2}\n\n"+
		`data: {"error":{"message":"decode answer cut off (request_id: rid-1)","type":"api_error","param":null,"code":503}}`+"\n\n",
		w.Body.String())
	hdr := w.Header()
	assert.Equal(t, "text/event-stream", hdr.Get("Content-Type"))
	assert.Equal(t, "no-cache", hdr.Get("Cache-Control"))
	assert.Equal(t, "no", hdr.Get("X-Accel-Buffering"))
	assert.Equal(t, "render;dur=1.0", hdr.Get("Server-Timing"))
	assert.Equal(t, "decode", hdr.Get("X-Sim-Pool"))
	assert.Equal(t, []string{"rid-1"}, hdr.Values("X-Request-Id"), "once, the front's")
	assert.Empty(t, hdr.Get("Grpc-X"))
	assert.Empty(t, hdr.Get("Transfer-Encoding"), "net/http frames the stream")
	assert.True(t, w.Flushed)
}

// TestGatewayAloneMapsARelayedStatus shows the limit of grpc-gateway's
// stream forwarding that answerWriter works around: an error before the
// first message is written with the gateway's own code mapping
// (runtime.HTTPStatusFromCode) and its error chunk, so a decode worker's
// relayed 422 becomes a 400 without the worker's body, whatever the stream
// error handler returns. Through the front the client gets the worker's
// status, body and headers.
func TestGatewayAloneMapsARelayedStatus(t *testing.T) {
	t.Parallel()
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, rawJSON{}))
	ctx := runtime.NewServerMetadataContext(context.Background(), runtime.ServerMetadata{})
	w := httptest.NewRecorder()
	runtime.ForwardResponseStream(ctx, mux, rawJSON{}, w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions:stream", nil),
		func() (proto.Message, error) { return nil, relayed(t).Err() })
	assert.Equal(t, http.StatusBadRequest, w.Code, "the gateway's mapping of INVALID_ARGUMENT")
	assert.NotContains(t, w.Body.String(), "worker's own")

	f := &fakeClient{header: metadata.Pairs("retry-after", "9"), end: relayed(t).Err()}
	w = postTo(fakeFront(t, f), "/v1/chat/completions", `{"stream":true}`, http.Header{"X-Request-Id": {"rid-1"}})
	assert.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Equal(t, `{"detail":"worker's own"}`, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "9", w.Header().Get("Retry-After"), "the worker's header")
	assert.Empty(t, w.Header().Get("Cache-Control"), "not a stream")
}

// Errors before the first event get the front's status and body: a
// refusal's Retry-After, the request id in the message.
func TestTranscodeStreamErrorBeforeTheFirstEvent(t *testing.T) {
	t.Parallel()
	st, err := status.New(codes.ResourceExhausted, "too many streams in flight").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	require.NoError(t, err)
	w := postTo(fakeFront(t, &fakeClient{end: st.Err()}), "/v1/chat/completions", `{"stream":true}`, http.Header{"X-Request-Id": {"rid-1"}})
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "3", w.Header().Get("Retry-After"))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, `{"error":{"message":"too many streams in flight (request_id: rid-1)","type":"rate_limit_error","param":null,"code":429}}`, w.Body.String())
}

// A stream that ends without an event is a 200 with no events; a tokens
// chunk, which REST never asks for, is an error, not a panic.
func TestTranscodeStreamEdges(t *testing.T) {
	t.Parallel()
	w := postTo(fakeFront(t, &fakeClient{}), "/v1/completions", `{"stream":true}`, nil)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Empty(t, w.Body.String())

	tokens := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &coordinatorv1.TokensChunk{}}}
	w = postTo(fakeFront(t, &fakeClient{events: []*coordinatorv1.GenerateStreamResponse{tokens}}), "/v1/completions", `{"stream":true}`,
		http.Header{"X-Request-Id": {"rid-t"}})
	assert.GreaterOrEqual(t, w.Code, 500)
	msg, _, _ := openAIError(t, w.Body.String())
	assert.Contains(t, msg, "tokens chunk")
	assert.Contains(t, msg, "(request_id: rid-t)")
}

// A unary error keeps the call's header metadata as headers: a relayed
// worker answer's Retry-After.
func TestTranscodeUnaryErrorKeepsTheWorkersHeaders(t *testing.T) {
	t.Parallel()
	f := &fakeClient{header: metadata.Pairs("retry-after", "4", "x-sim-pool", "decode", "x-request-id", "rid-1"), unaryErr: relayed(t).Err()}
	w := postTo(fakeFront(t, f), "/v1/chat/completions", `{}`, http.Header{"X-Request-Id": {"rid-1"}})
	assert.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Equal(t, `{"detail":"worker's own"}`, w.Body.String())
	assert.Equal(t, "4", w.Header().Get("Retry-After"))
	assert.Equal(t, "decode", w.Header().Get("X-Sim-Pool"))
	assert.Equal(t, []string{"rid-1"}, w.Header().Values("X-Request-Id"))
}

// The ":stream" bindings are the gateway's, reached only through the
// front: from outside they are unregistered paths.
func TestStreamBindingsAreNotRoutes(t *testing.T) {
	t.Parallel()
	f := &fakeClient{}
	h := fakeFront(t, f)
	for _, path := range []string{"/v1/chat/completions:stream", "/v1/completions:stream", "/inference/v1/generate:stream"} {
		w := postTo(h, path, `{"stream":true}`, nil)
		assert.Equal(t, http.StatusNotFound, w.Code, path)
	}
	assert.Nil(t, f.gotStream)
}

// TestFrontRequestsAreValid holds the front to what lets the chain skip
// protovalidate for its requests (frontdoor.Checked): whatever the
// client sends that reaches the service, the request the front builds
// meets every rule of the proto.
func TestFrontRequestsAreValid(t *testing.T) {
	t.Parallel()
	validator, err := protovalidate.New()
	require.NoError(t, err)
	ids := []string{"", "ok-1", "bad id!", strings.Repeat("a", 129), strings.Repeat("b", 128), "é", "a\x00b"}
	bodies := []string{`{}`, `{"model":"m","messages":[]}`, `{"stream":true}`, `{"stream":false,"prompt":"x"}`, ` { "stream" : true } `}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/inference/v1/generate"} {
		for _, id := range ids {
			for _, body := range bodies {
				f := &fakeClient{unary: &coordinatorv1.GenerateResponse{Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{Json: []byte(`{}`)}}}}
				postTo(fakeFront(t, f), path, body, http.Header{"X-Request-Id": {id}})
				var got proto.Message = f.gotUnary
				if f.gotStream != nil {
					got = f.gotStream
				}
				require.NotNil(t, got, "%s %q %s reached the service", path, id, body)
				assert.NoError(t, validator.Validate(got), "%s %q %s", path, id, body)
			}
		}
	}
}

// panickingFlusher is a ResponseWriter whose flush panics.
type panickingFlusher struct{ http.ResponseWriter }

func (panickingFlusher) FlushError() error { panic("flush failed") }

// TestAStreamsFirstFlushPanicsOnTheHandlersGoroutine: the first flush of a
// stream runs on a goroutine of its own (FlushError); a panic there comes
// back to the handler's goroutine, where net/http recovers it, instead of
// ending the process.
func TestAStreamsFirstFlushPanicsOnTheHandlersGoroutine(t *testing.T) {
	w := &answerWriter{ResponseWriter: panickingFlusher{httptest.NewRecorder()}, call: &call{}, stream: true}
	assert.PanicsWithValue(t, "flush failed", func() { _ = w.FlushError() })
}

// countingFlusher is a ResponseWriter that counts its flushes.
type countingFlusher struct {
	http.ResponseWriter
	flushes int
}

func (c *countingFlusher) FlushError() error { c.flushes++; return nil }

// TestEveryFlushOfAStreamReachesTheConnection: the first flush, run on a
// goroutine of its own, and the next ones, on the caller's, each flush the
// connection once; an answer that is not a stream flushes on the caller's.
func TestEveryFlushOfAStreamReachesTheConnection(t *testing.T) {
	for _, stream := range []bool{true, false} {
		under := &countingFlusher{ResponseWriter: httptest.NewRecorder()}
		w := &answerWriter{ResponseWriter: under, call: &call{}, stream: stream, h: &Handler{}}
		for i := 1; i <= 3; i++ {
			require.NoError(t, http.NewResponseController(w).Flush())
			assert.Equal(t, i, under.flushes, "stream %v", stream)
		}
	}
}
