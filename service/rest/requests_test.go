package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

func TestQueuedAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		msg         proto.Message
		status      int
		contentType string
		body        string
	}{
		{
			name: "pending",
			msg: &coordinatorv1.GetRequestResponse{Answer: &coordinatorv1.OpenAIResponse{
				StatusCode: 202, ContentType: "application/json", Json: []byte(`{"id":"j","status":"pending"}`),
			}},
			status: 202, contentType: "application/json", body: `{"id":"j","status":"pending"}`,
		},
		{
			name: "result",
			msg: &coordinatorv1.GetRequestResponse{Answer: &coordinatorv1.OpenAIResponse{
				StatusCode: 200, ContentType: "application/json", Json: []byte(`{"object":"chat.completion"}`),
			}},
			status: 200, contentType: "application/json", body: `{"object":"chat.completion"}`,
		},
		{
			name:   "deleted",
			msg:    &coordinatorv1.DeleteRequestResponse{},
			status: 204,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			w.Header().Set("Content-Type", "application/json") // as grpc-gateway sets it first
			forwardQueued(w, tt.msg)
			body, err := rawJSON{}.Marshal(tt.msg)
			assert.NoError(t, err)
			_, _ = w.Write(body)
			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, tt.contentType, w.Header().Get("Content-Type"))
			assert.Equal(t, tt.body, w.Body.String())
		})
	}
}

func TestServeQueuedWithoutStoreKeepsTheRoutesUnregistered(t *testing.T) {
	t.Parallel()
	h := &Handler{mux: http.NewServeMux()}
	h.serveQueued(nil)
	_, pattern := h.mux.Handler(httptest.NewRequest(http.MethodGet, "/v1/requests/j", nil))
	assert.Empty(t, pattern)
}
