package rest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordinator-project/coordinator/service/apierror"
)

// TestWriteErrorOfARefusal: a refusal's RetryInfo becomes Retry-After;
// only the shutting-down one (503) closes the connection.
func TestWriteErrorOfARefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		code       codes.Code
		delay      time.Duration
		status     int
		retryAfter string
		close      bool
	}{
		{name: "limit", code: codes.ResourceExhausted, delay: 1500 * time.Millisecond, status: 429, retryAfter: "2"},
		{name: "shutting down", code: codes.Unavailable, delay: time.Second, status: 503, retryAfter: "1", close: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, err := status.New(tt.code, "no").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(tt.delay)})
			require.NoError(t, err)
			w := httptest.NewRecorder()
			writeError(w, apierror.DialectOpenAI, st.Err())
			assert.Equal(t, tt.status, w.Code)
			assert.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"))
			assert.Equal(t, tt.close, w.Header().Get("Connection") == "close")
			assert.JSONEq(t, string(apierror.AppendOpenAIError(nil, tt.status, "no", "")), w.Body.String())
		})
	}
	w := httptest.NewRecorder()
	writeError(w, apierror.DialectOpenAI, status.Error(codes.Unavailable, "leg down"))
	assert.Empty(t, w.Header().Get("Retry-After"), "no RetryInfo, no Retry-After")
	assert.Empty(t, w.Header().Get("Connection"))
}

func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	tests := map[time.Duration]string{
		0: "1", time.Millisecond: "1", time.Second: "1", 1001 * time.Millisecond: "2", 30 * time.Second: "30",
	}
	for d, want := range tests {
		assert.Equal(t, want, retryAfter(d), d.String())
	}
}

func TestTimedOut(t *testing.T) {
	t.Parallel()
	assert.True(t, timedOut(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}))
	assert.False(t, timedOut(context.Canceled))
	assert.False(t, timedOut(&http.MaxBytesError{Limit: 1}))
}
