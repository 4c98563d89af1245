package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// refusingStep refuses every request, as async-broker refuses an unknown
// mode.
type refusingStep struct{}

func (refusingStep) Execute(context.Context, *steps.RequestContext) error {
	return &steps.Refusal{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "INVALID_REQUEST", Message: "unknown X-AP-Mode value"}
}

// neverStep follows the refusing step: it must not run.
type neverStep struct{ t *testing.T }

func (s neverStep) Execute(context.Context, *steps.RequestContext) error {
	s.t.Error("a step after a refusal ran")
	return nil
}

const refusalBody = `{"error":{"message":"unknown X-AP-Mode value","type":"invalid_request_error","code":"INVALID_REQUEST"}}`

func refusingCoordinator(t *testing.T) *Coordinator {
	t.Helper()
	p, err := steps.NewPipeline([]steps.Plugin{
		{Type: "gate", New: func(map[string]any) (steps.Step, error) { return refusingStep{}, nil }},
		{Type: "never", New: func(map[string]any) (steps.Step, error) { return neverStep{t}, nil }},
	}, []steps.StepConfig{{Type: "gate"}, {Type: "never"}}, steps.Defaults{})
	require.NoError(t, err)
	return NewCoordinator(p, metrics.New(), slog.New(slog.DiscardHandler), config.Default(), &legids.Registry{})
}

// A step's refusal is an answer over gRPC, as it was when the broker
// framed it: OK, with the refusal's status and the framed object.
func TestGenerateAnswersAStepsRefusal(t *testing.T) {
	t.Parallel()
	c := refusingCoordinator(t)
	resp, err := c.Generate(context.Background(), &coordinatorv1.GenerateRequest{
		RequestId: "r-1",
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":"m"}`),
		}},
	})
	require.NoError(t, err)
	a := resp.GetOpenai()
	assert.EqualValues(t, http.StatusBadRequest, a.GetStatusCode())
	assert.Equal(t, "application/json", a.GetContentType())
	assert.Equal(t, refusalBody, string(a.GetJson()))
}

// A stream cannot carry a status, so its refusal is the call's error:
// the refusal's code, with the framed answer attached for the REST front to
// write with the refusal's status; nothing is sent on the stream.
func TestGenerateStreamAnswersAStepsRefusal(t *testing.T) {
	t.Parallel()
	c := refusingCoordinator(t)
	f := &headerStream{}
	err := c.GenerateStream(&coordinatorv1.GenerateStreamRequest{
		RequestId: "r-2",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":"m","stream":true}`),
		}},
	}, f)
	st := status.Convert(err)
	assert.Equal(t, codes.InvalidArgument, st.Code())
	assert.Equal(t, "unknown X-AP-Mode value (request_id: r-2)", st.Message())
	assert.Equal(t, http.StatusBadRequest, apierror.HTTPStatus(st))
	u := apierror.UpstreamDetail(st)
	require.NotNil(t, u)
	assert.True(t, u.GetRelay())
	assert.Equal(t, "gate", u.GetLeg(), "the refusing step")
	assert.Equal(t, "application/json", u.GetContentType())
	assert.Equal(t, refusalBody, string(u.GetBody()))
	assert.Empty(t, f.sent)
}

// fakeStream records a copy of each message sent: the sink reuses its own.
type fakeStream struct {
	grpc.ServerStream
	sent []*coordinatorv1.GenerateStreamResponse
	err  error
}

func (f *fakeStream) Send(m *coordinatorv1.GenerateStreamResponse) error {
	f.sent = append(f.sent, proto.CloneOf(m))
	return f.err
}

func (f *fakeStream) Context() context.Context { return context.Background() }

// headerStream is a fakeStream that takes the call's header.
type headerStream struct{ fakeStream }

func (*headerStream) SetHeader(metadata.MD) error { return nil }

func TestRefuseLeavesOtherOutcomes(t *testing.T) {
	t.Parallel()
	sink := &unarySink{}
	rc := &steps.RequestContext{Sink: sink}
	boom := errors.New("boom")
	assert.Same(t, boom, refuse(rc, boom))
	assert.NoError(t, refuse(rc, nil))
	assert.Zero(t, sink.status, "nothing written")
}

func TestQueuedRefusalsAreFramed(t *testing.T) {
	t.Parallel()
	gone := &steps.Refusal{Status: http.StatusGone, Type: "invalid_request_error", Code: "UNKNOWN_REQUEST",
		Message: "request id is unknown, expired, or already deleted"}
	store := &queuedStore{answer: steps.Answer{Status: gone.Status, Refusal: gone}}
	c := queuedCoordinator(t, store)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-team", "team-a"))

	resp, err := c.GetRequest(ctx, &coordinatorv1.GetRequestRequest{Id: "j1"})
	require.NoError(t, err, "the stored request's answer, not a failure of the call")
	assert.EqualValues(t, http.StatusGone, resp.GetAnswer().GetStatusCode())
	assert.Equal(t, "application/json", resp.GetAnswer().GetContentType())
	assert.Equal(t, `{"error":{"message":"request id is unknown, expired, or already deleted","type":"invalid_request_error","code":"UNKNOWN_REQUEST"}}`,
		string(resp.GetAnswer().GetJson()))

	failed := &steps.Refusal{Status: http.StatusInternalServerError, Type: "api_error", Code: "DELETE_FAILED", Message: "result delete failed"}
	store.answer = steps.Answer{Status: failed.Status, Refusal: failed}
	_, err = c.DeleteRequest(ctx, &coordinatorv1.DeleteRequestRequest{Id: "j1"})
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Equal(t, http.StatusInternalServerError, apierror.HTTPStatus(st))
	u := apierror.UpstreamDetail(st)
	require.NotNil(t, u)
	assert.True(t, u.GetRelay())
	assert.Equal(t, "store", u.GetLeg(), "the store's step")
	assert.Equal(t, "application/json", u.GetContentType())
	assert.Equal(t, `{"error":{"message":"result delete failed","type":"api_error","code":"DELETE_FAILED"}}`, string(u.GetBody()))
}
