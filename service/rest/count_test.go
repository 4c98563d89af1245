package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

func (f *fakeClient) CountTokens(_ context.Context, in *coordinatorv1.CountTokensRequest, _ ...grpc.CallOption) (*coordinatorv1.CountTokensResponse, error) {
	f.gotCount = in
	if f.count == nil {
		return nil, f.unaryErr
	}
	return f.count, nil
}

// The count routes reach CountTokens with the body as openai.json, the
// route's endpoint and the request id, whatever "stream" says, and answer
// the count's bytes as JSON.
func TestCountRoutesTranscode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path     string
		endpoint coordinatorv1.Endpoint
		answer   string
	}{
		{"/v1/messages/count_tokens", coordinatorv1.Endpoint_ENDPOINT_MESSAGES, `{"input_tokens":7}`},
		{"/v1/responses/input_tokens", coordinatorv1.Endpoint_ENDPOINT_RESPONSES, `{"object":"response.input_tokens","input_tokens":7}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			f := &fakeClient{count: &coordinatorv1.CountTokensResponse{RequestId: "rid-1", InputTokens: 7,
				Openai: &coordinatorv1.OpenAIResponse{StatusCode: 200, ContentType: "application/json", Json: []byte(tc.answer)}}}
			const body = `{"model":"m","stream":"maybe","messages":[]}`
			w := postTo(fakeFront(t, f), tc.path, body, http.Header{"X-Request-Id": {"rid-1"}})
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, tc.answer, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			want := &coordinatorv1.CountTokensRequest{RequestId: "rid-1", Openai: &coordinatorv1.OpenAIRequest{Endpoint: tc.endpoint, Json: []byte(body)}}
			assert.True(t, proto.Equal(want, f.gotCount), "got %v", f.gotCount)
			assert.Nil(t, f.gotUnary)
			assert.Nil(t, f.gotStream)
		})
	}
}

// A count's error is the API's own error JSON with the mapped status:
// Anthropic's for count_tokens, OpenAI's for input_tokens; another method
// is 405 in the same dialect.
func TestCountRoutesErrors(t *testing.T) {
	t.Parallel()
	unimpl := status.Error(codes.Unimplemented, "token counting needs a render step in pipeline.steps (request_id: r)")
	for _, tc := range []struct {
		name, method, path, body string
		err                      error
		code                     int
		want                     string
	}{
		{"messages unimplemented", http.MethodPost, "/v1/messages/count_tokens", `{}`, unimpl, http.StatusNotImplemented,
			`{"type":"error","error":{"type":"api_error","message":"token counting needs a render step in pipeline.steps (request_id: r)"}}`},
		{"responses unimplemented", http.MethodPost, "/v1/responses/input_tokens", `{}`, unimpl, http.StatusNotImplemented,
			`"message":"token counting needs a render step in pipeline.steps (request_id: r)"`},
		{"messages not json", http.MethodPost, "/v1/messages/count_tokens", `[1]`, nil, http.StatusBadRequest,
			`{"type":"error","error":{"type":"invalid_request_error","message":"invalid JSON body`},
		{"responses get", http.MethodGet, "/v1/responses/input_tokens", ``, nil, http.StatusMethodNotAllowed, `"error":{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeClient{unaryErr: tc.err}
			h := fakeFront(t, f)
			w := postTo(h, tc.path, tc.body, http.Header{"X-Request-Id": {"r"}})
			if tc.method != http.MethodPost {
				w = doRequest(h, tc.method, tc.path)
			}
			assert.Equal(t, tc.code, w.Code, w.Body.String())
			assert.Contains(t, w.Body.String(), tc.want)
		})
	}
}

func doRequest(h http.Handler, method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}
