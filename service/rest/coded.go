package rest

import (
	"net/http"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// refuseCoded answers an inference request whose body is coded
// (Content-Encoding other than identity) with 415 in dialect d, and
// reports whether it did: neither the coordinator nor grpc-gateway decodes
// a request body, so a gzip body would be parsed as it is (a confusing
// 400) or, relayed, be read by a worker as something else.
func refuseCoded(w http.ResponseWriter, r *http.Request, d apierror.Dialect, id string) bool {
	if !headers.Encoded(r.Header) {
		return false
	}
	writeAPIError(w, d, http.StatusUnsupportedMediaType, errCoded.Error()+" (request_id: "+id+")", "")
	return true
}
