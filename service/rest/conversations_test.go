package rest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// conversationClient answers the Conversation RPCs it is given; the
// rest of the service is not called.
type conversationClient struct {
	coordinatorv1.CoordinatorServiceClient
	got []byte // the last create's body
}

func (c *conversationClient) CreateConversation(_ context.Context, req *coordinatorv1.CreateConversationRequest, _ ...grpc.CallOption) (*coordinatorv1.CreateConversationResponse, error) {
	c.got = req.GetJson()
	return &coordinatorv1.CreateConversationResponse{Json: []byte(`{"id":"conv_1","object":"conversation","created_at":1,"metadata":{}}`)}, nil
}

func (*conversationClient) GetConversationItem(_ context.Context, req *coordinatorv1.GetConversationItemRequest, _ ...grpc.CallOption) (*coordinatorv1.GetConversationItemResponse, error) {
	if req.GetItemId() != "msg_1" {
		return nil, status.Errorf(codes.NotFound, "Item with id '%s' not found.", req.GetItemId())
	}
	return &coordinatorv1.GetConversationItemResponse{Json: []byte(`{"id":"msg_1","type":"message"}`)}, nil
}

// TestConversationRoutes: the routes answer the RPCs' bytes as they are
// and their errors as OpenAI errors; a body is read under the body cap,
// a chunked one past it 413 before any RPC.
func TestConversationRoutes(t *testing.T) {
	t.Parallel()
	client := &conversationClient{}
	h := testHandler(t, client, Options{StoredResponses: true, MaxBody: 64})

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/conversations", strings.NewReader(`{"metadata":{"a":"b"}}`)))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `{"id":"conv_1","object":"conversation","created_at":1,"metadata":{}}`, w.Body.String())
	assert.Equal(t, `{"metadata":{"a":"b"}}`, string(client.got), "the body reaches the RPC as sent")

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/conversations/conv_1/items/msg_1?include[]=x", nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `{"id":"msg_1","type":"message"}`, w.Body.String())
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/conversations/conv_1/items/msg_2", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.JSONEq(t, `{"error":{"message":"Item with id 'msg_2' not found.","type":"not_found_error","param":null,"code":404}}`, w.Body.String())

	client.got = nil
	r := httptest.NewRequest(http.MethodPost, "/v1/conversations", io.MultiReader(strings.NewReader(`{"metadata":{"a":"`), strings.NewReader(strings.Repeat("b", 100)+`"}}`)))
	r.ContentLength = -1 // chunked: not refused from its headers
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "request body too large: the limit is 64 bytes")
	assert.Nil(t, client.got, "no RPC")
}
