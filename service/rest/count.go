package rest

import (
	"net/http"
	"strings"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service"
)

// handleCount serves a token count route (POST /v1/messages/count_tokens,
// /v1/responses/input_tokens) as an inference route, onto CountTokens'
// binding of the same path: the body read under the cap from the memory
// budget, parsed once, the errors in the API's dialect. "stream" is not
// read, and no step holds a count open.
func (h *Handler) handleCount(pattern string, endpoint coordinatorv1.Endpoint) {
	b := bindingOf(endpoint)
	_, path, _ := strings.Cut(pattern, " ")
	b.path, b.streamPath, b.count = path, "", true
	b.label = service.EndpointMessagesCountTokens
	if endpoint == coordinatorv1.Endpoint_ENDPOINT_RESPONSES {
		b.label = service.EndpointResponsesInputTokens
	}
	h.endpoints[pattern] = b
	// Not h.handle: its 405 for every other method of the path would
	// clash with "GET /v1/responses/{id}" (stored responses) on a GET of
	// /v1/responses/input_tokens; each method is named instead.
	h.mux.Handle(pattern, h.inference(b))
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodPatch} {
		h.mux.Handle(m+" "+path, methodNotAllowed(b.dialect, http.MethodPost))
	}
}
