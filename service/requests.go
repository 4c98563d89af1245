package service

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/steps"
)

// errNoRequestStore answers GetRequest and DeleteRequest when no step of
// the pipeline queues requests (steps.RequestStore).
var errNoRequestStore = status.Error(codes.Unimplemented, "queued requests are not served: no async-broker step is configured")

// GetRequest implements CoordinatorServiceServer: the answer of a queued
// request as the pipeline's request store keeps it (result, 202 pending,
// or a refusal such as 410 unknown, framed as the OpenAI error object),
// for the tenant the store's tenant header names.
func (c *Coordinator) GetRequest(ctx context.Context, req *coordinatorv1.GetRequestRequest) (*coordinatorv1.GetRequestResponse, error) {
	store, _ := c.pipeline.RequestStore()
	if store == nil {
		return nil, errNoRequestStore
	}
	a := answerOf(store.Lookup(ctx, tenantOf(ctx, store), req.GetId()))
	return &coordinatorv1.GetRequestResponse{Answer: &coordinatorv1.OpenAIResponse{
		StatusCode:  int32(a.Status),
		ContentType: a.ContentType,
		Json:        a.Body,
	}}, nil
}

// DeleteRequest implements CoordinatorServiceServer. A store failure is
// Unavailable, carrying the store's answer (HTTP 500 and its framed
// refusal) for the REST front to relay.
func (c *Coordinator) DeleteRequest(ctx context.Context, req *coordinatorv1.DeleteRequestRequest) (*coordinatorv1.DeleteRequestResponse, error) {
	store, step := c.pipeline.RequestStore()
	if store == nil {
		return nil, errNoRequestStore
	}
	a := answerOf(store.Delete(ctx, tenantOf(ctx, store), req.GetId()))
	if a.Status == http.StatusNoContent {
		return &coordinatorv1.DeleteRequestResponse{}, nil
	}
	st, err := status.New(codes.Unavailable, "queued request: delete failed").WithDetails(&coordinatorv1.UpstreamError{
		Leg: step, StatusCode: int32(a.Status), ContentType: a.ContentType, Body: a.Body, Relay: true,
	})
	if err != nil {
		return nil, status.Error(codes.Unavailable, "queued request: delete failed")
	}
	return nil, st.Err()
}

// tenantOf is the tenant the call metadata names (REST headers arrive as
// lowercase metadata); "" is the store's default tenant.
func tenantOf(ctx context.Context, store steps.RequestStore) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(store.TenantHeader()); len(v) > 0 {
		return v[0]
	}
	return ""
}
