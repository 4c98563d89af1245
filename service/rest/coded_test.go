package rest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCodedInferenceBodyIs415: nothing decodes a request's
// Content-Encoding, so an inference body that says it is coded is refused
// before it is read, in the route's dialect.
func TestCodedInferenceBodyIs415(t *testing.T) {
	t.Parallel()
	f := &fakeClient{}
	h := fakeFront(t, f)
	gzip := "\x1f\x8b\x08\x00\x00\x00\x00\x00"
	for _, tt := range []struct{ path, want string }{
		{"/v1/chat/completions", `{"error":{"message":"content-encoding is not supported: send the body uncoded (request_id: rid-gz)","type":"invalid_request_error","param":null,"code":415}}`},
		{"/v1/messages", `{"type":"error","error":{"type":"invalid_request_error","message":"content-encoding is not supported: send the body uncoded (request_id: rid-gz)"}}`},
	} {
		w := postTo(h, tt.path, gzip, http.Header{"Content-Encoding": {"gzip"}, "X-Request-Id": {"rid-gz"}})
		assert.Equal(t, http.StatusUnsupportedMediaType, w.Code, tt.path)
		assert.JSONEq(t, tt.want, w.Body.String(), tt.path)
	}
	assert.Nil(t, f.gotUnary, "never handed to the service")

	w := postTo(h, "/v1/chat/completions", `{"model":"m"}`, http.Header{"Content-Encoding": {"identity"}})
	assert.NotEqual(t, http.StatusUnsupportedMediaType, w.Code, "identity is no coding")
	assert.NotNil(t, f.gotUnary)
}
