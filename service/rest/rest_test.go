package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
)

func TestAppendEvent(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		`{"a":1}`: "data: {\"a\":1}\n\n",
		"[DONE]":  "data: [DONE]\n\n",
		"a\nb":    "data: a\ndata: b\n\n",
		"":        "data: \n\n",
	}
	for in, want := range tests {
		assert.Equal(t, want, string(appendEvent(nil, []byte(in))), in)
	}
}

func TestWriteErrorRelaysTheDecodeWorkersAnswer(t *testing.T) {
	t.Parallel()
	st, err := status.New(codes.NotFound, "decode rejected the request").WithDetails(&coordinatorv1.UpstreamError{
		Leg: "decode", StatusCode: 404, ContentType: "application/problem+json", Body: []byte(`{"worker":true}`), Relay: true,
	})
	require.NoError(t, err)
	w := httptest.NewRecorder()
	writeError(w, apierror.DialectOpenAI, st.Err())
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Equal(t, `{"worker":true}`, w.Body.String())
}
