package rest

import (
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
	h.handle(pattern, h.inference(b))
}
