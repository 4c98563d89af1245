package service

import (
	"context"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/responses"
)

// The Conversations API's RPCs (service/responses conversation_api.go):
// each answers OpenAI's JSON as bytes, for the call's tenant;
// UNIMPLEMENTED with the response store off.

// CreateConversation implements CoordinatorServiceServer.
func (c *Coordinator) CreateConversation(ctx context.Context, req *coordinatorv1.CreateConversationRequest) (*coordinatorv1.CreateConversationResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.CreateConversation(ctx, c.tenant(ctx), req.GetJson())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.CreateConversationResponse{Json: b}, nil
}

// GetConversation implements CoordinatorServiceServer.
func (c *Coordinator) GetConversation(ctx context.Context, req *coordinatorv1.GetConversationRequest) (*coordinatorv1.GetConversationResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.Conversation(ctx, c.tenant(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.GetConversationResponse{Json: b}, nil
}

// UpdateConversation implements CoordinatorServiceServer.
func (c *Coordinator) UpdateConversation(ctx context.Context, req *coordinatorv1.UpdateConversationRequest) (*coordinatorv1.UpdateConversationResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.UpdateConversation(ctx, c.tenant(ctx), req.GetId(), req.GetJson())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.UpdateConversationResponse{Json: b}, nil
}

// DeleteConversation implements CoordinatorServiceServer.
func (c *Coordinator) DeleteConversation(ctx context.Context, req *coordinatorv1.DeleteConversationRequest) (*coordinatorv1.DeleteConversationResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.DeleteConversation(ctx, c.tenant(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.DeleteConversationResponse{Json: b}, nil
}

// ListConversationItems implements CoordinatorServiceServer.
func (c *Coordinator) ListConversationItems(ctx context.Context, req *coordinatorv1.ListConversationItemsRequest) (*coordinatorv1.ListConversationItemsResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	page := responses.Page{Limit: int(req.GetLimit()), Order: req.GetOrder(), After: req.GetAfter()}
	b, err := c.responses.ConversationItems(ctx, c.tenant(ctx), req.GetId(), page)
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.ListConversationItemsResponse{Json: b}, nil
}

// CreateConversationItems implements CoordinatorServiceServer.
func (c *Coordinator) CreateConversationItems(ctx context.Context, req *coordinatorv1.CreateConversationItemsRequest) (*coordinatorv1.CreateConversationItemsResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.AddConversationItems(ctx, c.tenant(ctx), req.GetId(), req.GetJson())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.CreateConversationItemsResponse{Json: b}, nil
}

// GetConversationItem implements CoordinatorServiceServer.
func (c *Coordinator) GetConversationItem(ctx context.Context, req *coordinatorv1.GetConversationItemRequest) (*coordinatorv1.GetConversationItemResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.ConversationItem(ctx, c.tenant(ctx), req.GetId(), req.GetItemId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.GetConversationItemResponse{Json: b}, nil
}

// DeleteConversationItem implements CoordinatorServiceServer.
func (c *Coordinator) DeleteConversationItem(ctx context.Context, req *coordinatorv1.DeleteConversationItemRequest) (*coordinatorv1.DeleteConversationItemResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.DeleteConversationItem(ctx, c.tenant(ctx), req.GetId(), req.GetItemId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.DeleteConversationItemResponse{Json: b}, nil
}
