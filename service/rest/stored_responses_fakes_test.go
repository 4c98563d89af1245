package rest

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// The stored Responses' RPCs of the fake clients: none is stored.

func (*fakeClient) GetResponse(context.Context, *coordinatorv1.GetResponseRequest, ...grpc.CallOption) (*coordinatorv1.GetResponseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*fakeClient) DeleteResponse(context.Context, *coordinatorv1.DeleteResponseRequest, ...grpc.CallOption) (*coordinatorv1.DeleteResponseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*fakeClient) ListInputItems(context.Context, *coordinatorv1.ListInputItemsRequest, ...grpc.CallOption) (*coordinatorv1.ListInputItemsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}
