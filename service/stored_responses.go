package service

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/responses"
)

// beginTurn reads a checked document's part in the response store and
// returns the document the steps get (rebuilt when it continues a stored
// response); nil when responses are not stored.
type beginTurn func(doc *requestbody.Document) (*requestbody.Document, error)

// checked checks doc (parsed from body) as the coordinator serves it: a
// Responses or Messages body's shape, and, with begin, a Responses body's
// "store" and "previous_response_id" left to begin, whose document (and
// its bytes) it returns.
func checked(doc *requestbody.Document, body []byte, begin beginTurn, id string) (*requestbody.Document, []byte, error) {
	check := doc.Check
	if begin != nil {
		check = doc.CheckStored
	}
	if err := check(); err != nil { // a Responses or Messages body's shape
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v (request_id: %s)", err, id)
	}
	if begin == nil || doc.Format() != legs.FormatResponses {
		return doc, body, nil
	}
	rebuilt, err := begin(doc)
	if err != nil || rebuilt == doc {
		return doc, body, err
	}
	return rebuilt, rebuilt.Bytes(), nil
}

// beginTurn is the request's turn in the response store
// (responses.Store.Begin, for the tenant of the call's metadata) and the
// document its steps get: doc, or the rebuilt conversation parsed anew
// within the body limits and checked again. Errors name the request id.
func (c *Coordinator) beginTurn(ctx context.Context, id string, doc *requestbody.Document) (*responses.Turn, *requestbody.Document, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	turn, rebuilt, err := c.responses.Begin(ctx, doc.Root(), c.responses.Tenant(md))
	if err != nil {
		st := status.Convert(err)
		return nil, nil, status.Errorf(st.Code(), "%s (request_id: %s)", st.Message(), id)
	}
	if !rebuilt {
		return turn, doc, nil
	}
	next, err := requestbody.ParseLimited(doc.Bytes(), doc.Format(), c.limits)
	if err != nil {
		return nil, nil, invalidBody(err, id)
	}
	if err := next.CheckStored(); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v (request_id: %s)", err, id)
	}
	return turn, next, nil
}

// errNotStored answers the stored Responses' RPCs when
// responses.store.backend is off.
var errNotStored = status.Error(codes.Unimplemented, "responses are not stored: responses.store.backend is off")

// tenant is the tenant of the call on ctx.
func (c *Coordinator) tenant(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return c.responses.Tenant(md)
}

// GetResponse implements CoordinatorServiceServer.
func (c *Coordinator) GetResponse(ctx context.Context, req *coordinatorv1.GetResponseRequest) (*coordinatorv1.GetResponseResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.Response(ctx, c.tenant(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.GetResponseResponse{Json: b}, nil
}

// DeleteResponse implements CoordinatorServiceServer.
func (c *Coordinator) DeleteResponse(ctx context.Context, req *coordinatorv1.DeleteResponseRequest) (*coordinatorv1.DeleteResponseResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	b, err := c.responses.Delete(ctx, c.tenant(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.DeleteResponseResponse{Json: b}, nil
}

// ListInputItems implements CoordinatorServiceServer.
func (c *Coordinator) ListInputItems(ctx context.Context, req *coordinatorv1.ListInputItemsRequest) (*coordinatorv1.ListInputItemsResponse, error) {
	if c.responses == nil {
		return nil, errNotStored
	}
	page := responses.Page{Limit: int(req.GetLimit()), Order: req.GetOrder(), After: req.GetAfter()}
	b, err := c.responses.InputItems(ctx, c.tenant(ctx), req.GetId(), page)
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.ListInputItemsResponse{Json: b}, nil
}
