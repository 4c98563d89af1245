package service

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/service/apierror"
)

func generateRequest(n int) *coordinatorv1.GenerateRequest {
	return &coordinatorv1.GenerateRequest{RequestId: "rid", Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, Json: []byte(`{"prompt":"` + strings.Repeat("x", n) + `"}`),
	}}}
}

// A network call opens its account, draws its message's share, hands the
// account to the handler in its context and closes it when the call ends.
func TestBudgetUnaryDrawsTheMessage(t *testing.T) {
	t.Parallel()
	b := membudget.New(10_000, 0)
	req := generateRequest(1000)
	var held int64
	_, err := budgetUnary(b)(context.Background(), req, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		held = membudget.FromContext(ctx).Held()
		return nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, membudget.BodyCharge(int64(proto.Size(req))), held)
	assert.Zero(t, b.InUse(), "closed when the call ended")
	assert.EqualValues(t, membudget.BodyCharge(int64(proto.Size(req))), b.Peak())
}

// The REST front's call carries its account (its body drawn already): the
// chain draws nothing more.
func TestBudgetUnaryKeepsTheFrontsAccount(t *testing.T) {
	t.Parallel()
	b := membudget.New(10_000, 0)
	front := b.Open()
	ctx := membudget.WithAccount(context.Background(), front)
	_, err := budgetUnary(b)(ctx, generateRequest(1000), &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		assert.Same(t, front, membudget.FromContext(ctx))
		return nil, nil
	})
	require.NoError(t, err)
	assert.Zero(t, b.Peak(), "nothing drawn twice")
}

// Past the budget a call is RESOURCE_EXHAUSTED: with a RetryInfo (REST
// 429) while others hold the budget, without (413) when it never fits.
func TestBudgetUnaryRefusals(t *testing.T) {
	t.Parallel()
	b := membudget.New(10_000, 0)
	called := false
	handler := func(context.Context, any) (any, error) { called = true; return nil, nil }

	_, err := budgetUnary(b)(context.Background(), generateRequest(6000), &grpc.UnaryServerInfo{}, handler)
	st := status.Convert(err)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Contains(t, st.Message(), "more than the whole budget")
	assert.Contains(t, st.Message(), "request_id: rid")
	assert.Equal(t, 413, apierror.HTTPStatus(st))

	holder := b.Open()
	require.NoError(t, holder.Take(context.Background(), 9000))
	_, err = budgetUnary(b)(context.Background(), generateRequest(600), &grpc.UnaryServerInfo{}, handler)
	st = status.Convert(err)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	_, retry := apierror.RetryDelay(st)
	assert.True(t, retry)
	assert.Equal(t, 429, apierror.HTTPStatus(st))
	assert.False(t, called)
	assert.EqualValues(t, 9000, b.InUse())
}

// A stream's messages draw as they are received; its account closes with
// the stream.
func TestBudgetStreamDrawsEachMessage(t *testing.T) {
	t.Parallel()
	b := membudget.New(10_000, 0)
	msg := &coordinatorv1.GenerateStreamRequest{RequestId: "rid", Input: &coordinatorv1.GenerateStreamRequest_Openai{
		Openai: &coordinatorv1.OpenAIRequest{Json: []byte(`{"prompt":"` + strings.Repeat("x", 1000) + `"}`)}}}
	ss := &recvStream{ctx: context.Background(), msg: msg}
	err := budgetStream(b)(nil, ss, &grpc.StreamServerInfo{}, func(_ any, s grpc.ServerStream) error {
		var got coordinatorv1.GenerateStreamRequest
		require.NoError(t, s.RecvMsg(&got))
		assert.Equal(t, membudget.BodyCharge(int64(proto.Size(&got))), membudget.FromContext(s.Context()).Held())
		return nil
	})
	require.NoError(t, err)
	assert.Zero(t, b.InUse())
	assert.Positive(t, b.Peak())
}

// recvStream is a server stream that receives msg.
type recvStream struct {
	grpc.ServerStream
	ctx context.Context
	msg proto.Message
}

func (s *recvStream) Context() context.Context { return s.ctx }

func (s *recvStream) RecvMsg(m any) error {
	proto.Merge(m.(proto.Message), s.msg)
	return nil
}
