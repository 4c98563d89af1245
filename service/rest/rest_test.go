package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
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

func TestOpenAIErrorBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code  int
		typ   string
		param string
	}{
		{400, "invalid_request_error", "messages"}, {404, "not_found_error", ""}, {413, "invalid_request_error", ""},
		{429, "rate_limit_error", ""}, {502, "api_error", ""}, {504, "timeout_error", ""},
	}
	for _, tt := range tests {
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    int     `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(appendOpenAIError(nil, tt.code, "say \"hi\"\n", tt.param), &e))
		assert.Equal(t, "say \"hi\"\n", e.Error.Message)
		assert.Equal(t, tt.typ, e.Error.Type)
		assert.Equal(t, tt.code, e.Error.Code)
		if tt.param == "" {
			assert.Nil(t, e.Error.Param)
		} else {
			assert.Equal(t, tt.param, *e.Error.Param)
		}
	}
}

func TestWriteErrorRelaysTheDecodeWorkersAnswer(t *testing.T) {
	t.Parallel()
	st, err := status.New(codes.NotFound, "decode rejected the request").WithDetails(&coordinatorv1.UpstreamError{
		Leg: "decode", StatusCode: 404, ContentType: "application/problem+json", Body: []byte(`{"worker":true}`), Relay: true,
	})
	require.NoError(t, err)
	w := httptest.NewRecorder()
	writeError(w, st.Err())
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Equal(t, `{"worker":true}`, w.Body.String())
}
