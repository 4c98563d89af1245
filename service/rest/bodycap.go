package rest

import (
	"net/http"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// refuseDeclaredBody answers, on every route, a request whose
// Content-Length is past server.max_request_body_size, from its headers
// alone (service.DeclaredBodyTooLarge): 413, an OpenAI error naming both
// lengths and the request id, Connection: close. Nothing reads the body,
// so net/http never sends the 100 Continue a client with Expect:
// 100-continue waits for, and a client that sends its body anyway has at
// most 256 KiB of it discarded by the server before it closes the
// connection (the rest is never read). An inference or passthrough request
// is counted in the metrics under its endpoint. It reports whether it
// answered.
func (h *Handler) refuseDeclaredBody(w http.ResponseWriter, r *http.Request) bool {
	msg, refuse := service.DeclaredBodyTooLarge(r.ContentLength, h.maxBody)
	if !refuse {
		return false
	}
	id := headers.RequestIDOrNew(r.Header.Get("X-Request-Id"))
	w.Header().Set("X-Request-Id", id)
	w.Header().Set("Connection", "close")
	_, pattern := h.mux.Handler(r)
	writeAPIError(w, h.endpoints[pattern].dialect, http.StatusRequestEntityTooLarge, msg+" (request_id: "+id+")", "")
	if endpoint, ok := h.endpointOf(pattern); ok {
		h.metrics.RequestDone(metrics.APIREST, endpoint, strconv.Itoa(http.StatusRequestEntityTooLarge), 0)
	}
	return true
}

// endpointOf is the metrics' endpoint label of the route of mux pattern
// pattern: an inference route's format, or the passthrough's; false for
// the routes the request metrics do not count.
func (h *Handler) endpointOf(pattern string) (string, bool) {
	if b, ok := h.endpoints[pattern]; ok {
		return b.format.String(), true
	}
	if pattern == "/" && h.pass != nil {
		return endpointPassthrough, true
	}
	return "", false
}
