package rest

import (
	"net/url"
	"strings"

	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// serveStoredResponses serves the stored Responses (responses.store:
// service/responses): GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items, transcoded onto GetResponse,
// DeleteResponse and ListInputItems, which answer OpenAI's JSON as bytes.
// With the store off the routes stay unregistered (the passthrough takes
// them, as before).
func (h *Handler) serveStoredResponses(on bool) {
	if !on {
		return
	}
	h.mux.Handle("GET /v1/responses/{id}", h.gateway)
	h.mux.Handle("DELETE /v1/responses/{id}", h.gateway)
	h.mux.Handle("GET /v1/responses/{id}/input_items", h.gateway)
	h.serveConversations()
}

// storedBody is the answer body of the stored Responses' RPCs, as is.
func storedBody(v any) ([]byte, bool) {
	switch r := v.(type) {
	case *coordinatorv1.GetResponseResponse:
		return r.GetJson(), true
	case *coordinatorv1.DeleteResponseResponse:
		return r.GetJson(), true
	case *coordinatorv1.ListInputItemsResponse:
		return r.GetJson(), true
	}
	return conversationBody(v)
}

// storedQuery is the query of a stored Response's route without OpenAI's
// include[] (the SDKs' spelling of a repeated key, which grpc-gateway
// would read as a map; include is ignored anyway).
func storedQuery(msg proto.Message, values url.Values) url.Values {
	switch msg.(type) {
	case *coordinatorv1.GetResponseRequest, *coordinatorv1.ListInputItemsRequest, *coordinatorv1.ListConversationItemsRequest,
		*coordinatorv1.CreateConversationItemsRequest, *coordinatorv1.GetConversationItemRequest:
	default:
		return values
	}
	kept := make(url.Values, len(values))
	for k, v := range values {
		if !strings.HasPrefix(k, "include[") {
			kept[k] = v
		}
	}
	return kept
}
