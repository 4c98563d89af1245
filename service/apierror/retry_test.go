package apierror_test

import (
	"net/http"
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

// TestRetryInfo: a refusal carrying a RetryInfo keeps its wait through
// gRPC's wire form; RESOURCE_EXHAUSTED with one is a limit (429), without
// one a size (413).
func TestRetryInfo(t *testing.T) {
	t.Parallel()
	withRetry := func(code codes.Code, d time.Duration) *status.Status {
		st, err := status.New(code, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		require.NoError(t, err)
		return status.Convert(st.Err())
	}
	tests := []struct {
		name   string
		st     *status.Status
		http   int
		delay  time.Duration
		hasTry bool
	}{
		{name: "limit", st: withRetry(codes.ResourceExhausted, 1500*time.Millisecond), http: http.StatusTooManyRequests, delay: 1500 * time.Millisecond, hasTry: true},
		{name: "message too large", st: status.New(codes.ResourceExhausted, "x"), http: http.StatusRequestEntityTooLarge},
		{name: "shutting down", st: withRetry(codes.Unavailable, time.Second), http: http.StatusServiceUnavailable, delay: time.Second, hasTry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.http, apierror.HTTPStatus(tt.st))
			d, ok := apierror.RetryDelay(tt.st)
			assert.Equal(t, tt.hasTry, ok)
			assert.Equal(t, tt.delay, d)
		})
	}
}
