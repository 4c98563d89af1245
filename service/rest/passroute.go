package rest

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// The passthrough fails closed. A worker's server (uvicorn, then
// Starlette's router) decodes a path once, %2F included, before it routes,
// and FastAPI parses a body as JSON whatever its Content-Type, so the
// passthrough refuses what it cannot relay the way the worker will read
// it: a path that is not canonical once decoded, a path that reaches one of
// vLLM's inference handlers outside the pipeline, a coded body, and a body
// that is not one JSON object (but a form on vLLM's audio routes).

// pipelineRoots are the paths whose handlers, and those below them, run
// inference on a worker (media fetched, transfer params read): they are
// served by the pipeline or not at all. /invocations is vLLM's SageMaker
// route, which hands the body to the chat, completions or a pooling
// handler by which one validates it first; the */render routes render a
// prompt, fetching its media; /v1/messages/count_tokens renders too.
var pipelineRoots = [...]string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
	"/inference/v1/generate", "/invocations",
}

// formRoutes are vLLM's routes whose body is a form (an audio file), not
// JSON: relayed as it came.
// controlRoots are the engines' own control routes (vLLM's pause, weight
// update, sleep and RL routes) and the coordinator's ControlService
// transcoding: served on control.listen_addr only, never relayed from the
// public port to a worker (docs/rl.md).
var controlRoots = [...]string{
	"/v1/rl", "/pause", "/resume", "/is_paused", "/abort_requests",
	"/init_weight_transfer_engine", "/start_weight_update", "/update_weights", "/finish_weight_update",
	"/update_weight_version", "/weight_info", "/weight_checker", "/get_world_size",
	"/sleep", "/wake_up", "/is_sleeping", "/collective_rpc", "/reset_prefix_cache",
}

var formRoutes = map[string]bool{"/v1/audio/transcriptions": true, "/v1/audio/translations": true}

// refusePath is the status and message refusing a relayed request's path,
// 0 when it may be relayed. r.URL.Path is the path decoded, as the worker
// will route it.
func refusePath(r *http.Request) (int, string) {
	escaped, decoded := r.URL.EscapedPath(), r.URL.Path
	if strings.Contains(strings.ToLower(escaped), "%2f") {
		return http.StatusBadRequest, "path " + escaped + " is not relayed: it holds an encoded \"/\""
	}
	if !canonical(decoded) {
		return http.StatusBadRequest, "path " + escaped + " is not relayed: it is not canonical once decoded (an empty, \".\" or \"..\" segment)"
	}
	if root, ok := underRoot(decoded, controlRoots[:]); ok {
		return http.StatusNotFound, "no route for " + r.Method + " " + escaped + ": " + root +
			" is a control route, served on the control listener only (control.listen_addr), and is not relayed"
	}
	if root, ok := underRoot(decoded, pipelineRoots[:]); ok {
		return http.StatusNotFound, "no route for " + r.Method + " " + escaped + ": it reaches " + root +
			" on a worker outside the pipeline, and is not relayed"
	}
	return 0, ""
}

// canonical reports whether a decoded path has no empty, "." or ".."
// segment (a trailing "/" aside).
func canonical(path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	segments := strings.Split(strings.TrimSuffix(path[1:], "/"), "/")
	if len(segments) == 1 && segments[0] == "" {
		return true // "/"
	}
	for _, s := range segments {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}

// underRoot is the root of roots a decoded path is, with any number of
// trailing slashes (Starlette redirects those to it), or lies below.
func underRoot(path string, roots []string) (string, bool) {
	p := strings.TrimRight(path, "/")
	for _, root := range roots {
		if p == root || strings.HasPrefix(p, root+"/") {
			return root, true
		}
	}
	return "", false
}

// isForm reports whether a relayed body is a form sent to a form route.
func isForm(r *http.Request) bool {
	if !formRoutes[strings.TrimRight(r.URL.Path, "/")] {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "multipart/form-data" || mt == "application/x-www-form-urlencoded")
}

// errCoded refuses a coded body: the coordinator does not decode one, and
// no worker does either.
var errCoded = errors.New("content-encoding is not supported: send the body uncoded")

// refuseBody is the status and message refusing a relayed request for its
// body's headers, 0 when it may be relayed.
func refuseBody(r *http.Request) (int, string) {
	if r.ContentLength != 0 && headers.Encoded(r.Header) {
		return http.StatusUnsupportedMediaType, errCoded.Error()
	}
	return 0, ""
}

// errPassedMedia refuses a relayed body whose messages carry media: the
// pooling routes (/v1/embeddings, /pooling, /classify, /score) take chat
// messages, and a worker would fetch their URLs itself, around the media
// guard that only the inference routes run.
var errPassedMedia = errors.New("media content parts are not relayed: only the inference routes guard and fetch media; send the media inline to an inference route, or text here")

// passJSON checks a relayed JSON body: one JSON object without a repeated
// key (the worker would read the last, the coordinator the first), within
// the body structure limits, without media content parts in its messages
// (errPassedMedia), its
// client transfer params removed unless server.trust_client_transfer_params
// is on (compat D23; logged and counted). It returns the body to relay and
// whether it is the client's as sent. An empty body goes as it came.
func (h *Handler) passJSON(r *http.Request, id string, data []byte) ([]byte, bool, error) {
	if len(data) == 0 {
		return data, true, nil
	}
	doc, err := requestbody.ParseLimited(data, legs.FormatChat, h.limits)
	if err != nil {
		return nil, false, err
	}
	obj := doc.Root()
	if key, dup := obj.DuplicateKey(); dup {
		return nil, false, fmt.Errorf("duplicate key %q", key)
	}
	if doc.HasMedia() {
		return nil, false, errPassedMedia
	}
	if h.trustTransfer {
		return data, true, nil
	}
	dropped := requestbody.DropTransferParams(obj)
	if dropped == nil {
		return data, true, nil
	}
	service.TransferParamsDropped(r.Context(), h.metrics, h.pass.log, id, metrics.APIREST, endpointPassthrough, dropped, "path", r.URL.Path)
	return obj.Bytes(), false, nil
}

// passHeader is what a relayed request carries of the client's headers
// (headers.Passthrough, X-Forwarded-For/-Host added), its routing headers
// dropped and reported (compat D24).
func (h *Handler) passHeader(r *http.Request, id string, asSent bool) headers.Forwarded {
	f, dropped := headers.Passthrough(withForwardedFor(r), h.trusted, asSent)
	if dropped != nil {
		service.RoutingHeadersDropped(r.Context(), h.metrics, h.pass.log, id, metrics.APIREST, endpointPassthrough, dropped, "path", r.URL.Path)
	}
	return f
}
