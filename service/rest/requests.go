package rest

import (
	"net/http"
	"time"

	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
)

// serveQueued serves the queued requests of the pipeline's request store
// (a step implementing steps.RequestStore, such as async-broker): GET and
// DELETE /v1/requests/{id}, transcoded onto GetRequest and DeleteRequest.
// Without a store (nil) the routes stay unregistered: 404, as in the
// reference without the step.
func (h *Handler) serveQueued(store steps.RequestStore) {
	if store == nil {
		return
	}
	h.queued = store
	h.mux.Handle("GET /v1/requests/{id}", h.gateway)
	h.mux.Handle("DELETE /v1/requests/{id}", h.gateway)
}

// holdOpen lifts the server's write timeout from a request a step will
// hold until its result (steps.Holder: async-broker's wait mode), bounded
// by the request's own deadline instead.
func (h *Handler) holdOpen(w http.ResponseWriter, r *http.Request) {
	if h.holder == nil {
		return
	}
	if f, _ := headers.FromHTTP(r.Header, h.trusted); h.holder.Holds(f) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
}

// queuedBody is the answer body of GetRequest (the stored bytes, as is)
// and DeleteRequest (none).
func queuedBody(v any) ([]byte, bool) {
	switch r := v.(type) {
	case *coordinatorv1.GetRequestResponse:
		return r.GetAnswer().GetJson(), true
	case *coordinatorv1.DeleteRequestResponse:
		return nil, true
	}
	return nil, false
}

// forwardQueued gives GetRequest's answer its status and content type, and
// DeleteRequest's its 204.
func forwardQueued(w http.ResponseWriter, m proto.Message) {
	switch r := m.(type) {
	case *coordinatorv1.GetRequestResponse:
		if ct := r.GetAnswer().GetContentType(); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		if code := int(r.GetAnswer().GetStatusCode()); code >= 200 && code <= 599 && code != http.StatusOK {
			w.WriteHeader(code)
		}
	case *coordinatorv1.DeleteRequestResponse:
		w.Header().Del("Content-Type")
		w.WriteHeader(http.StatusNoContent)
	}
}
