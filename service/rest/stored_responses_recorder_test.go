package rest_test

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// The stored Responses' RPCs of endpointRecorder: not in these tests.

func (*endpointRecorder) GetResponse(context.Context, *coordinatorv1.GetResponseRequest, ...grpc.CallOption) (*coordinatorv1.GetResponseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) DeleteResponse(context.Context, *coordinatorv1.DeleteResponseRequest, ...grpc.CallOption) (*coordinatorv1.DeleteResponseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) ListInputItems(context.Context, *coordinatorv1.ListInputItemsRequest, ...grpc.CallOption) (*coordinatorv1.ListInputItemsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) CreateConversation(context.Context, *coordinatorv1.CreateConversationRequest, ...grpc.CallOption) (*coordinatorv1.CreateConversationResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) GetConversation(context.Context, *coordinatorv1.GetConversationRequest, ...grpc.CallOption) (*coordinatorv1.GetConversationResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) UpdateConversation(context.Context, *coordinatorv1.UpdateConversationRequest, ...grpc.CallOption) (*coordinatorv1.UpdateConversationResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) DeleteConversation(context.Context, *coordinatorv1.DeleteConversationRequest, ...grpc.CallOption) (*coordinatorv1.DeleteConversationResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) ListConversationItems(context.Context, *coordinatorv1.ListConversationItemsRequest, ...grpc.CallOption) (*coordinatorv1.ListConversationItemsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) CreateConversationItems(context.Context, *coordinatorv1.CreateConversationItemsRequest, ...grpc.CallOption) (*coordinatorv1.CreateConversationItemsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) GetConversationItem(context.Context, *coordinatorv1.GetConversationItemRequest, ...grpc.CallOption) (*coordinatorv1.GetConversationItemResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (*endpointRecorder) DeleteConversationItem(context.Context, *coordinatorv1.DeleteConversationItemRequest, ...grpc.CallOption) (*coordinatorv1.DeleteConversationItemResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}
