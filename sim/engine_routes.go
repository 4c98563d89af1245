package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Control routes of an engine, as vLLM serves them in dev mode
// (vllm/entrypoints/serve/dev/rlhf/api_router.py, .../dev/sleep/).
const (
	pathPause             = "/pause"
	pathResume            = "/resume"
	pathIsPaused          = "/is_paused"
	pathAbortRequests     = "/abort_requests"
	pathWeightInfo        = "/weight_info"
	pathUpdateVersion     = "/update_weight_version"
	pathInitTransfer      = "/init_weight_transfer_engine"
	pathStartWeightUpdate = "/start_weight_update"
	pathUpdateWeights     = "/update_weights"
	pathFinishUpdate      = "/finish_weight_update"
	pathWeightChecker     = "/weight_checker"
	pathWorldSize         = "/get_world_size"
	pathSleep             = "/sleep"
	pathWakeUp            = "/wake_up"
	pathIsSleeping        = "/is_sleeping"
)

// maxControlBody caps a control request's body.
const maxControlBody = 1 << 20

// engineHandler serves an engine's listener: its control routes, then its
// own inference routes (as a worker of its role, no gateway rules).
func (s *Sim) engineHandler(e *engine) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(PoolHeader, e.role.String())
		if h, method, ok := e.controlRoute(r.URL.Path); ok {
			if r.Method != method {
				writeControl(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
				return
			}
			h(w, r)
			return
		}
		s.serveDirect(w, r, e.role, e) // as a worker of its role
	})
}

// controlRoute is the handler and method of a control path.
func (e *engine) controlRoute(path string) (http.HandlerFunc, string, bool) {
	post := map[string]http.HandlerFunc{
		pathPause: e.servePause, pathResume: e.serveResume, pathAbortRequests: e.serveAbort,
		pathUpdateVersion: e.serveUpdateVersion, pathInitTransfer: e.serveInitTransfer,
		pathStartWeightUpdate: e.serveStartUpdate, pathUpdateWeights: e.serveUpdateWeights,
		pathFinishUpdate: e.serveFinishUpdate, pathWeightChecker: e.serveWeightChecker,
		pathSleep: e.serveSleep, pathWakeUp: e.serveWakeUp,
	}
	if h, ok := post[path]; ok {
		return h, http.MethodPost, true
	}
	get := map[string]http.HandlerFunc{
		pathIsPaused: e.serveIsPaused, pathWeightInfo: e.serveWeightInfo,
		pathWorldSize: e.serveWorldSize, pathIsSleeping: e.serveIsSleeping,
	}
	h, ok := get[path]
	return h, http.MethodGet, ok
}

// writeControl answers status with v as JSON.
func writeControl(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // maps and plain structs only
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// detail answers a FastAPI HTTPException: {"detail": msg}.
func detail(w http.ResponseWriter, status int, msg string) {
	writeControl(w, status, map[string]string{"detail": msg})
}

// readControl decodes a JSON object body into v; an empty body leaves v
// as it is. It answers 400 and reports false on a bad body.
func readControl(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	if err != nil {
		detail(w, http.StatusBadRequest, "Invalid JSON format")
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		detail(w, http.StatusBadRequest, "Invalid JSON format")
		return false
	}
	return true
}

// servePause pauses the engine. abort aborts the requests in flight; wait
// answers once they have finished; keep freezes them. New requests wait
// for the resume in every mode.
func (e *engine) servePause(w http.ResponseWriter, r *http.Request) {
	mode, ok := stopMode(r.URL.Query())
	if !ok {
		writeControl(w, http.StatusBadRequest, map[string]string{
			"error": "invalid pause mode " + strconv.Quote(mode) + ": expected abort, wait or keep"})
		return
	}
	if e.quiesce(r.Context(), mode, func() { e.paused, e.mode = true, mode }) != nil {
		return
	}
	writeControl(w, http.StatusOK, map[string]string{"status": "paused"})
}

// stopMode is a /pause or /sleep request's mode, abort by default; false
// for one that is not abort, wait or keep.
func stopMode(q url.Values) (string, bool) {
	mode := q.Get("mode")
	if mode == "" {
		mode = PauseAbort
	}
	return mode, mode == PauseAbort || mode == PauseWait || mode == PauseKeep
}

// quiesce applies a pause or a sleep: set records it under e.mu; then mode
// abort ends the requests in flight at once, wait returns once they have
// finished (or ctx's error), keep leaves them frozen.
func (e *engine) quiesce(ctx context.Context, mode string, set func()) error {
	e.mu.Lock()
	set()
	if mode == PauseAbort {
		e.abortLocked(nil)
	}
	e.broadcast()
	e.mu.Unlock()
	if mode != PauseWait {
		return nil
	}
	return e.await(ctx, func() bool { return len(e.flights) == 0 })
}

func (e *engine) serveResume(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	e.paused, e.mode = false, ""
	e.broadcast()
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]string{"status": "resumed"})
}

func (e *engine) serveIsPaused(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	paused := e.paused
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]bool{"is_paused": paused})
}

// serveAbort aborts the requests named by request_ids (x-request-id or
// the generate body's request_id), every request when none is named.
func (e *engine) serveAbort(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RequestIDs []string `json:"request_ids"`
	}
	if !readControl(w, r, &req) {
		return
	}
	e.mu.Lock()
	n := e.abortLocked(req.RequestIDs)
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]any{"status": "aborted", "aborted": n})
}

func (e *engine) serveWeightInfo(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	v := e.version
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]string{"weight_version": v})
}

// setVersion relabels the engine's weights; tokens produced from now on
// carry v.
func (e *engine) setVersion(v string) {
	e.mu.Lock()
	e.version = v
	e.broadcast()
	e.mu.Unlock()
}

func (e *engine) serveUpdateVersion(w http.ResponseWriter, r *http.Request) {
	var req struct {
		NewVersion *string `json:"new_version"`
	}
	if !readControl(w, r, &req) {
		return
	}
	if req.NewVersion == nil {
		detail(w, http.StatusUnprocessableEntity, "new_version: Field required")
		return
	}
	e.setVersion(*req.NewVersion)
	writeControl(w, http.StatusOK, map[string]any{"success": true, "new_version": *req.NewVersion})
}

func (e *engine) serveInitTransfer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InitInfo json.RawMessage `json:"init_info"`
	}
	if !readControl(w, r, &req) {
		return
	}
	if isNull(req.InitInfo) {
		detail(w, http.StatusBadRequest, "Missing 'init_info' in request body")
		return
	}
	e.mu.Lock()
	e.initInfo = req.InitInfo
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]string{"message": "Weight transfer initialized"})
}

func (e *engine) serveStartUpdate(w http.ResponseWriter, _ *http.Request) {
	writeControl(w, http.StatusOK, map[string]string{"message": "Weight update started"})
}

func (e *engine) serveUpdateWeights(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UpdateInfo json.RawMessage `json:"update_info"`
	}
	if !readControl(w, r, &req) {
		return
	}
	if isNull(req.UpdateInfo) {
		detail(w, http.StatusBadRequest, "Missing 'update_info' in request body")
		return
	}
	e.mu.Lock()
	e.weights = string(req.UpdateInfo)
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]string{"message": "Weights updated"})
}

// serveFinishUpdate ends a weight update; a weight_version sets the
// engine's version.
func (e *engine) serveFinishUpdate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		WeightVersion *string `json:"weight_version"`
	}
	if !readControl(w, r, &req) {
		return
	}
	if req.WeightVersion != nil {
		e.setVersion(*req.WeightVersion)
	}
	writeControl(w, http.StatusOK, map[string]string{"message": "Weight update finished"})
}

// serveWeightChecker answers checksum, reset and compare over one
// simulated weight whose checksum follows the last update_info.
func (e *engine) serveWeightChecker(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Action   string            `json:"action"`
		Baseline map[string]string `json:"baseline"`
	}
	if !readControl(w, r, &req) {
		return
	}
	if req.Action != "checksum" && req.Action != "reset" && req.Action != "compare" {
		detail(w, http.StatusBadRequest, "action must be one of checksum|reset|compare, got "+strconv.Quote(req.Action))
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused || e.sleeping {
		detail(w, http.StatusConflict, "weight_checker requires an awake, unpaused engine")
		return
	}
	if req.Action == "compare" && req.Baseline == nil {
		detail(w, http.StatusBadRequest, "action='compare' requires a 'baseline' object")
		return
	}
	if req.Action == "reset" {
		e.weights = "reset"
		writeControl(w, http.StatusOK, map[string]string{"status": "reset"})
		return
	}
	sum := sha256.Sum256([]byte(e.weights))
	checksums := map[string]string{"model.weight": hex.EncodeToString(sum[:])}
	if req.Action == "checksum" {
		writeControl(w, http.StatusOK, map[string]any{"checksums": checksums})
		return
	}
	mismatches := []string{}
	if !maps.Equal(checksums, req.Baseline) {
		mismatches = append(mismatches, "model.weight")
	}
	writeControl(w, http.StatusOK, map[string]any{"match": len(mismatches) == 0, "mismatches": mismatches})
}

// serveWorldSize answers the configured world size (no data parallelism,
// so include_dp changes nothing).
func (e *engine) serveWorldSize(w http.ResponseWriter, _ *http.Request) {
	writeControl(w, http.StatusOK, map[string]int{"world_size": e.worldSize})
}

// serveSleep puts the engine to sleep: it refuses generation with 503
// until /wake_up. mode (abort by default, as vLLM's) treats the requests
// in flight as /pause does: abort ends them, wait answers once they have
// finished, keep freezes them until /wake_up. level must be an integer.
func (e *engine) serveSleep(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if l := q.Get("level"); l != "" {
		if _, err := strconv.Atoi(l); err != nil {
			detail(w, http.StatusUnprocessableEntity, "level: Input should be a valid integer")
			return
		}
	}
	mode, ok := stopMode(q)
	if !ok {
		detail(w, http.StatusBadRequest, "invalid sleep mode "+strconv.Quote(mode)+": expected abort, wait or keep")
		return
	}
	if e.quiesce(r.Context(), mode, func() { e.sleeping, e.sleepMode = true, mode }) != nil {
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *engine) serveWakeUp(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	e.sleeping, e.sleepMode = false, ""
	e.broadcast()
	e.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (e *engine) serveIsSleeping(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	sleeping := e.sleeping
	e.mu.Unlock()
	writeControl(w, http.StatusOK, map[string]bool{"is_sleeping": sleeping})
}
