package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// serveConversations serves the OpenAI Conversations API on the response
// store (service/responses), transcoded onto the Conversation RPCs, which
// answer OpenAI's JSON as bytes: /v1/conversations[/{id}] and its items.
// A body is read under server.max_request_body_size (413 past it, as a
// declared one is refused by refuseDeclaredBody).
func (h *Handler) serveConversations() {
	capped := h.capped(h.gateway)
	h.mux.Handle("POST /v1/conversations", capped)
	h.mux.Handle("GET /v1/conversations/{id}", h.gateway)
	h.mux.Handle("POST /v1/conversations/{id}", capped)
	h.mux.Handle("DELETE /v1/conversations/{id}", h.gateway)
	h.mux.Handle("GET /v1/conversations/{id}/items", h.gateway)
	h.mux.Handle("POST /v1/conversations/{id}/items", capped)
	h.mux.Handle("GET /v1/conversations/{id}/items/{item_id}", h.gateway)
	h.mux.Handle("DELETE /v1/conversations/{id}/items/{item_id}", h.gateway)
}

// capped reads a request's body whole under server.max_request_body_size
// before next gets it (as a *bodyReader, which rawJSON's decoder takes
// without a copy): past it, 413 and an OpenAI error.
func (h *Handler) capped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			w.Header().Set("Connection", "close")
			writeAPIError(w, apierror.DialectOpenAI, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body too large: the limit is %d bytes", h.maxBody), "")
			return
		case err != nil:
			writeAPIError(w, apierror.DialectOpenAI, http.StatusBadRequest, "read body: "+err.Error(), "")
			return
		}
		r.Body = &bodyReader{data: data}
		next.ServeHTTP(w, r)
	})
}

// conversationBody is the answer body of the Conversation RPCs, as is.
func conversationBody(v any) ([]byte, bool) {
	type jsonAnswer interface{ GetJson() []byte }
	switch v.(type) {
	case *coordinatorv1.CreateConversationResponse, *coordinatorv1.GetConversationResponse,
		*coordinatorv1.UpdateConversationResponse, *coordinatorv1.DeleteConversationResponse,
		*coordinatorv1.ListConversationItemsResponse, *coordinatorv1.CreateConversationItemsResponse,
		*coordinatorv1.GetConversationItemResponse, *coordinatorv1.DeleteConversationItemResponse:
		return v.(jsonAnswer).GetJson(), true
	}
	return nil, false
}
