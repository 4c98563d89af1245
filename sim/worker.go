package sim

import (
	"encoding/json"
	"net/http"
)

// role is the worker pool a leg reaches.
type role int

const (
	roleEncode role = iota
	rolePrefill
	roleDecode
)

func (rl role) String() string {
	switch rl {
	case roleEncode:
		return "encode"
	case rolePrefill:
		return "prefill"
	}
	return "decode"
}

// roleOf maps a lowercased EPP profile to its pool.
func roleOf(profile string) (role, bool) {
	switch profile {
	case "encode":
		return roleEncode, true
	case "prefill":
		return rolePrefill, true
	case "decode":
		return roleDecode, true
	}
	return roleDecode, false
}

// legCall is one request reaching a worker.
type legCall struct {
	role role
	// conditional marks a decode leg with Prefer: if-available (gateway only).
	conditional bool
	// strict applies the wire rules (gateway legs of a strict Sim).
	strict    bool
	body      []byte
	fault     fault
	requestID string // the x-request-id header, possibly empty
	// engine runs the leg; nil until serveLeg picks one of the role's.
	engine *engine
}

// Worker returns one decode worker reached directly, with no gateway in
// front: no EPP logic, no strict rules, no leg recording, no
// conditional-decode. decode faults of [FaultHeader] apply. It serves the
// same endpoints as the gateway's pools.
func (s *Sim) Worker() http.Handler {
	return http.HandlerFunc(s.serveWorker)
}

func (s *Sim) serveWorker(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(PoolHeader, roleDecode.String())
	s.serveDirect(w, r, roleDecode, nil)
}

// serveDirect answers a request sent to a worker directly, not through
// the gateway, as a worker of role (on engine e, when not nil): no EPP
// logic, no strict rules, no leg recording; the faults of its role apply.
func (s *Sim) serveDirect(w http.ResponseWriter, r *http.Request, rl role, e *engine) {
	body, apiErr := readBody(w, r, s.opts.MaxBodyBytes)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	faults, apiErr := parseFaults(r.Header)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	s.serveLeg(w, r, legCall{
		role:      rl,
		body:      body,
		fault:     faults.target(faultTarget(rl, false)),
		requestID: r.Header.Get("X-Request-Id"),
		engine:    e,
	})
}

// serveLeg routes a worker request and answers it as its pool would.
func (s *Sim) serveLeg(w http.ResponseWriter, r *http.Request, call legCall) {
	f, ok := formatOf(r.URL.Path)
	if !ok {
		s.serveWorkerInfo(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, message: "Method Not Allowed"})
		return
	}
	call.fault = s.faults.take(call.fault, call.requestID, faultTarget(call.role, call.conditional))
	if call.fault.inject(w, r) {
		return
	}
	req, apiErr := parseWorkerRequest(f, call.body)
	if apiErr != nil {
		writeLegError(w, f, apiErr)
		return
	}
	model, ok := s.model(req.Model)
	if !ok {
		writeLegError(w, f, modelNotFound(req.Model))
		return
	}
	if apiErr := s.checkLeg(call, req); apiErr != nil {
		writeLegError(w, f, apiErr)
		return
	}
	fl, apiErr := s.admit(r, &call, req)
	if apiErr != nil {
		writeLegError(w, f, apiErr)
		return
	}
	defer call.engine.done(fl)
	w.Header().Set(EngineHeader, call.engine.id)
	if s.opts.SessionAffinity == SessionByToken {
		w.Header().Set("X-Session-Token", sessionToken(call.engine))
	}
	if call.role == roleEncode {
		s.answerEncode(r.Context(), w, call, req, model)
		return
	}
	s.answerGeneration(w, r, call, req, model, fl)
}

// answerGeneration answers a prefill or decode leg its engine admitted as
// flight fl.
func (s *Sim) answerGeneration(w http.ResponseWriter, r *http.Request, call legCall, req *workerRequest, model string, fl *flight) {
	f := req.format
	key := s.promptKey(model, req)
	if call.conditional {
		if _, hit := s.served.get(key); !hit {
			writeLegError(w, f, &apiError{
				status:  http.StatusPreconditionFailed,
				message: "sim: no decode endpoint holds this prompt (Prefer: if-available)",
			})
			return
		}
	}
	cached, apiErr := s.promptCache(call, req, model)
	if apiErr != nil {
		writeLegError(w, f, apiErr)
		return
	}
	s.served.put(key, struct{}{})
	g := s.newGeneration(call, req, model)
	g.cached = cached
	g.engine, g.flight = call.engine, fl
	if call.role == rolePrefill && !call.fault.dropsKV() {
		g.kv = s.prefillAnswer(call, req)
	}
	g.write(r.Context(), w)
}

// admit picks the leg's engine (unless it has one) and registers the
// request with it, holding it while the engine is paused.
func (s *Sim) admit(r *http.Request, call *legCall, req *workerRequest) (*flight, *apiError) {
	if call.engine == nil {
		e, apiErr := s.pickEngine(call.role, r.Header)
		if apiErr != nil {
			return nil, apiErr
		}
		call.engine = e
	}
	ids := []string{call.requestID}
	if req.RequestID != "" && req.RequestID != call.requestID {
		ids = append(ids, req.RequestID)
	}
	return call.engine.admit(r.Context(), ids)
}

// promptCache is how many prompt tokens the leg's worker had cached: a
// decode worker after a remote prefill counts every token whose KV it
// received (and, having no prompt logits, fails a request for the prompt's
// logprobs, as vLLM's decoder does); otherwise the pool's prefix cache
// answers.
func (s *Sim) promptCache(call legCall, req *workerRequest, model string) (int, *apiError) {
	if call.role == roleDecode && req.remotePrefill() {
		if req.promptLogprobs() >= 0 {
			return 0, errNoPromptLogits
		}
		s.decodeCache.serve(cacheScope(model, req), req.promptUnits())
		return req.promptTokens(), nil
	}
	pool := s.decodeCache
	if call.role == rolePrefill {
		pool = s.prefillCache
	}
	return pool.serve(cacheScope(model, req), req.promptUnits()), nil
}

// checkLeg applies the strict rules of the leg's pool.
func (s *Sim) checkLeg(call legCall, req *workerRequest) *apiError {
	if !call.strict {
		return nil
	}
	switch {
	case req.format == formatResponses && (!isNull(req.KVTransferParams) || !isNull(req.ECTransferParams)):
		return strictError(ruleResponsesKV)
	case req.format == formatMessages && !isNull(req.ECTransferParams):
		return strictError(ruleMessagesEC)
	}
	switch call.role {
	case roleEncode:
		return checkEncode(req)
	case rolePrefill:
		return checkPrefill(req)
	}
	return s.checkDecode(req, call.requestID, call.conditional)
}

// serveWorkerInfo answers the non-inference endpoints: GET /health and
// GET /v1/models.
func (s *Sim) serveWorkerInfo(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case pathHealth:
		w.WriteHeader(http.StatusOK)
	case pathModels:
		if r.Method != http.MethodGet {
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, message: "Method Not Allowed"})
			return
		}
		writeJSON(w, s.modelList())
	default:
		writeError(w, &apiError{status: http.StatusNotFound, message: "Not Found"})
	}
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	MaxModelLen int    `json:"max_model_len"`
}

func (s *Sim) modelList() modelList {
	l := modelList{Object: "list", Data: make([]modelCard, len(s.models))}
	created := s.opts.Now().Unix()
	for i, m := range s.models {
		l.Data[i] = modelCard{ID: m, Object: "model", Created: created, OwnedBy: "sim", Root: m, MaxModelLen: MaxModelLen}
	}
	return l
}

// writeJSON answers 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, message: "sim: encode response: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
