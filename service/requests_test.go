package service

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/steps"
)

// queuedStore is a step keeping queued requests in memory; it records the
// tenant and id of each call.
type queuedStore struct {
	calls  []string
	answer steps.Answer
}

func (*queuedStore) Execute(context.Context, *steps.RequestContext) error { return nil }
func (*queuedStore) TenantHeader() string                                 { return "x-team" }

func (f *queuedStore) Lookup(_ context.Context, tenant, id string) steps.Answer {
	f.calls = append(f.calls, "lookup "+tenant+" "+id)
	return f.answer
}

func (f *queuedStore) Delete(_ context.Context, tenant, id string) steps.Answer {
	f.calls = append(f.calls, "delete "+tenant+" "+id)
	return f.answer
}

func queuedCoordinator(t *testing.T, step steps.Step) *Coordinator {
	t.Helper()
	p, err := steps.NewPipeline([]steps.Plugin{{Type: "store", New: func(map[string]any) (steps.Step, error) { return step, nil }}},
		[]steps.StepConfig{{Type: "store"}}, steps.Defaults{})
	require.NoError(t, err)
	return NewCoordinator(p, nil, slog.New(slog.DiscardHandler), config.Default(), &legids.Registry{})
}

func TestGetRequestAnswersFromTheStore(t *testing.T) {
	t.Parallel()
	store := &queuedStore{answer: steps.Answer{Status: http.StatusAccepted, ContentType: "application/json", Body: []byte(`{"id":"j1","status":"pending"}`)}}
	c := queuedCoordinator(t, store)

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-team", "team-a"))
	resp, err := c.GetRequest(ctx, &coordinatorv1.GetRequestRequest{Id: "j1"})
	require.NoError(t, err)
	assert.EqualValues(t, http.StatusAccepted, resp.GetAnswer().GetStatusCode())
	assert.Equal(t, "application/json", resp.GetAnswer().GetContentType())
	assert.Equal(t, `{"id":"j1","status":"pending"}`, string(resp.GetAnswer().GetJson()))

	_, err = c.GetRequest(context.Background(), &coordinatorv1.GetRequestRequest{Id: "j2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"lookup team-a j1", "lookup  j2"}, store.calls, "no tenant metadata: the store's default")
}

func TestDeleteRequest(t *testing.T) {
	t.Parallel()
	store := &queuedStore{answer: steps.Answer{Status: http.StatusNoContent}}
	c := queuedCoordinator(t, store)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-team", "team-a"))
	_, err := c.DeleteRequest(ctx, &coordinatorv1.DeleteRequestRequest{Id: "j1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"delete team-a j1"}, store.calls)

	// A store failure: Unavailable for gRPC, the store's own 500 and body
	// for REST.
	body := `{"error":{"message":"result delete failed","type":"api_error","code":"DELETE_FAILED"}}`
	store.answer = steps.Answer{Status: http.StatusInternalServerError, ContentType: "application/json", Body: []byte(body)}
	_, err = c.DeleteRequest(ctx, &coordinatorv1.DeleteRequestRequest{Id: "j1"})
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Equal(t, http.StatusInternalServerError, apierror.HTTPStatus(st))
	u := apierror.UpstreamDetail(st)
	require.NotNil(t, u)
	assert.True(t, u.GetRelay())
	assert.Equal(t, body, string(u.GetBody()))
}

func TestQueuedRequestsWithoutAStore(t *testing.T) {
	t.Parallel()
	c := queuedCoordinator(t, &inertStep{})
	_, err := c.GetRequest(context.Background(), &coordinatorv1.GetRequestRequest{Id: "j1"})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "no async-broker step is configured")
	_, err = c.DeleteRequest(context.Background(), &coordinatorv1.DeleteRequestRequest{Id: "j1"})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}

type inertStep struct{}

func (inertStep) Execute(context.Context, *steps.RequestContext) error { return nil }
