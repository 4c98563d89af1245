package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// EngineHeader names the engine a gateway leg goes to ("decode-1"); without
// it the gateway picks the role's engines round robin.
const EngineHeader = "X-Sim-Engine"

// DefaultWeightVersion is every engine's weight version until one is set.
const DefaultWeightVersion = "v1"

// Pause modes of POST /pause, as vLLM's PauseMode.
const (
	PauseAbort = "abort"
	PauseWait  = "wait"
	PauseKeep  = "keep"
)

// finishAbort is the finish_reason of an aborted generation.
const finishAbort = "abort"

// EngineCounts is the number of engines per role. A zero count means one.
type EngineCounts struct {
	Encode, Prefill, Decode int
}

// Engine is one simulated vLLM engine, addressable on its own listener once
// [Sim.ListenEngines] has run.
type Engine struct {
	// ID is "<role>-<index>", e.g. "decode-1".
	ID string `json:"id"`
	// Role is "encode", "prefill" or "decode".
	Role string `json:"role"`
	// Addr is the engine's host:port, empty until it listens.
	Addr string `json:"address"`

	e *engine
}

// Stop kills the engine: its listener and connections close (requests to
// its address fail at the transport), the gateway stops picking it, and
// its gateway legs in flight are cut. It cannot be restarted.
func (e Engine) Stop() { e.e.stop() }

// WeightVersion is the engine's current weight version.
func (e Engine) WeightVersion() string {
	e.e.mu.Lock()
	defer e.e.mu.Unlock()
	return e.e.version
}

// InitInfo is the init_info of the engine's last
// POST /init_weight_transfer_engine, nil before one.
func (e Engine) InitInfo() json.RawMessage {
	e.e.mu.Lock()
	defer e.e.mu.Unlock()
	return slices.Clone(e.e.initInfo)
}

// WaitInFlight waits until the engine runs exactly n requests (admitted
// and not finished) or ctx ends.
func (e Engine) WaitInFlight(ctx context.Context, n int) error {
	return e.e.await(ctx, func() bool { return len(e.e.flights) == n })
}

// maxWatchedSteps is the most steps WaitStarted can wait for: later steps
// wake no waiter.
const maxWatchedSteps = 8

// WaitStarted waits until n of the engine's requests in flight have
// started at least k (at most maxWatchedSteps) tokens each.
func (e Engine) WaitStarted(ctx context.Context, n, k int) error {
	k = min(k, maxWatchedSteps)
	return e.e.await(ctx, func() bool {
		started := 0
		for f := range e.e.flights {
			if f.steps >= k {
				started++
			}
		}
		return started >= n
	})
}

// WaitFrozen waits until exactly n requests in flight are frozen by a
// keep pause or ctx ends.
func (e Engine) WaitFrozen(ctx context.Context, n int) error {
	return e.e.await(ctx, func() bool { return e.e.frozen == n })
}

// WaitHeld waits until exactly n requests wait for the engine to resume
// (held by a pause) or ctx ends.
func (e Engine) WaitHeld(ctx context.Context, n int) error {
	return e.e.await(ctx, func() bool { return e.e.held == n })
}

// engine is the state of one engine. Every change closes and replaces
// changed, so waiters re-check their condition.
type engine struct {
	id        string
	role      role
	worldSize int

	mu       sync.Mutex
	changed  chan struct{}
	paused   bool
	mode     string
	version  string
	sleeping bool
	// sleepMode is the mode of the last /sleep: keep freezes the flights.
	sleepMode string
	stopped   bool
	initInfo  json.RawMessage
	weights   string // what the weight checker hashes
	flights   map[*flight]struct{}
	held      int
	frozen    int
	server    *http.Server
	// beforeStep, if set (tests only, before any request), is called
	// before each token of a flight is produced.
	beforeStep atomic.Pointer[func(f *flight, i int)]
	addr       string
}

// flight is one request an engine runs.
type flight struct {
	// ids are the request's ids: x-request-id and the body's request_id.
	ids     []string
	aborted bool // under engine.mu
	steps   int  // the tokens started, under engine.mu
}

func newEngine(rl role, index, worldSize int) *engine {
	return &engine{
		id:        rl.String() + "-" + strconv.Itoa(index),
		role:      rl,
		worldSize: worldSize,
		changed:   make(chan struct{}),
		version:   DefaultWeightVersion,
		weights:   "initial",
		flights:   map[*flight]struct{}{},
	}
}

// broadcast wakes every waiter; the caller holds e.mu.
func (e *engine) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// await waits until cond (called under e.mu) holds or ctx ends.
func (e *engine) await(ctx context.Context, cond func() bool) error {
	for {
		e.mu.Lock()
		ok, ch := cond(), e.changed
		e.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitLocked waits, e.mu held, for the engine's next change or ctx's end,
// and returns with e.mu held again: ctx's error when it ended first.
func (e *engine) waitLocked(ctx context.Context) error {
	ch := e.changed
	e.mu.Unlock()
	defer e.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var (
	errEngineStopped  = errors.New("sim: engine stopped")
	errEngineSleeping = &apiError{status: http.StatusServiceUnavailable, message: "sim: engine is sleeping"}
)

// admit registers a request, holding it while the engine is paused. It
// fails when the engine sleeps (503), is stopped, or ctx ends.
func (e *engine) admit(ctx context.Context, ids []string) (*flight, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	counted := false
	defer func() {
		if counted {
			e.held--
			e.broadcast()
		}
	}()
	for {
		switch {
		case e.stopped:
			return nil, &apiError{status: http.StatusBadGateway, message: "sim: engine " + e.id + " is down"}
		case e.sleeping:
			return nil, errEngineSleeping
		case !e.paused:
			f := &flight{ids: ids}
			e.flights[f] = struct{}{}
			e.broadcast()
			return f, nil
		}
		if !counted {
			counted = true
			e.held++
			e.broadcast()
		}
		if e.waitLocked(ctx) != nil {
			return nil, &apiError{status: http.StatusServiceUnavailable, message: "sim: request gone while held"}
		}
	}
}

// done ends a flight.
func (e *engine) done(f *flight) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.flights, f)
	e.broadcast()
}

// step is called before each token of a flight: it waits while the engine
// is frozen (a keep pause or sleep) and returns the weight version that
// produces the token. err is errEngineStopped for a stopped engine, errAborted for an
// aborted flight, or ctx's error.
func (e *engine) step(ctx context.Context, f *flight) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	frozen := false
	defer func() {
		if frozen {
			e.frozen--
			e.broadcast()
		}
	}()
	for {
		switch {
		case e.stopped:
			return "", errEngineStopped
		case f.aborted:
			return "", errAborted
		case !e.frozenLocked():
			f.steps++
			if f.steps <= maxWatchedSteps {
				e.broadcast()
			}
			return e.version, nil
		}
		if !frozen {
			frozen = true
			e.frozen++
			e.broadcast()
		}
		if err := e.waitLocked(ctx); err != nil {
			return "", err
		}
	}
}

var errAborted = errors.New("sim: request aborted")

// frozenLocked reports whether flights stand still: a keep pause or a
// keep sleep. The caller holds e.mu.
func (e *engine) frozenLocked() bool {
	return (e.paused && e.mode == PauseKeep) || (e.sleeping && e.sleepMode == PauseKeep)
}

// abort aborts the flights whose request id is in ids (all when ids is
// empty) and returns how many; the caller holds e.mu.
func (e *engine) abortLocked(ids []string) int {
	n := 0
	for f := range e.flights {
		if f.aborted || (len(ids) > 0 && !slices.ContainsFunc(f.ids, func(id string) bool {
			return id != "" && slices.Contains(ids, id)
		})) {
			continue
		}
		f.aborted = true
		n++
	}
	if n > 0 {
		e.broadcast()
	}
	return n
}

func (e *engine) stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	srv := e.server
	e.broadcast()
	e.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (e *engine) up() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.stopped
}

func (e *engine) public() Engine {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Engine{ID: e.id, Role: e.role.String(), Addr: e.addr, e: e}
}

// pickEngine is the engine of a leg: the one named by [EngineHeader] when
// it holds an engine ID of the role, otherwise the engine its session is
// bound to ([SessionByID]), otherwise the role's next engine up, round
// robin. It fails (502) when the named engine or every engine of the role
// is stopped.
func (s *Sim) pickEngine(rl role, h http.Header) (*engine, *apiError) {
	pool := s.engines[rl]
	if name := strings.TrimSpace(h.Get(EngineHeader)); name != "" {
		for _, e := range pool {
			if e.id == name {
				if !e.up() {
					return nil, &apiError{status: http.StatusBadGateway, message: "sim: engine " + e.id + " is down"}
				}
				return e, nil
			}
		}
	}
	switch s.opts.SessionAffinity {
	case SessionByID:
		if sid := h.Get("X-Session-Id"); sid != "" {
			return s.sessionEngine(rl, sid)
		}
	case SessionByToken:
		if id, err := base64.StdEncoding.DecodeString(h.Get("X-Session-Token")); err == nil {
			for _, e := range pool {
				if e.id == string(id) && e.up() {
					return e, nil
				}
			}
		}
	}
	return s.nextUp(rl)
}

// sessionToken is the x-session-token naming engine e (SessionByToken).
func sessionToken(e *engine) string { return base64.StdEncoding.EncodeToString([]byte(e.id)) }

// sessionEngine is the engine session sid is bound to for role rl, bound
// now (round robin) when it has none or its engine is down.
func (s *Sim) sessionEngine(rl role, sid string) (*engine, *apiError) {
	s.sessionsMu.Lock()
	defer s.sessionsMu.Unlock()
	if e := s.sessions[rl][sid]; e != nil && e.up() {
		return e, nil
	}
	e, apiErr := s.nextUp(rl)
	if apiErr != nil {
		return nil, apiErr
	}
	if s.sessions[rl] == nil {
		s.sessions[rl] = map[string]*engine{}
	}
	s.sessions[rl][sid] = e
	return e, nil
}

// nextUp is the role's next engine up, round robin.
func (s *Sim) nextUp(rl role) (*engine, *apiError) {
	pool := s.engines[rl]
	start := s.nextEngine[rl].Add(1) - 1
	for i := range len(pool) {
		if e := pool[(int(start)+i)%len(pool)]; e.up() {
			return e, nil
		}
	}
	return nil, &apiError{status: http.StatusBadGateway, message: "sim: no " + rl.String() + " engine is up"}
}

// Engines lists the engines, encode first, then prefill, then decode, each
// by index. Addr is empty before [Sim.ListenEngines].
func (s *Sim) Engines() []Engine {
	var out []Engine
	for _, pool := range s.engines {
		for _, e := range pool {
			out = append(out, e.public())
		}
	}
	return out
}

// Engine returns the engine with this ID.
func (s *Sim) Engine(id string) (Engine, bool) {
	for _, pool := range s.engines {
		for _, e := range pool {
			if e.id == id {
				return e.public(), true
			}
		}
	}
	return Engine{}, false
}

// weightSpan is vLLM's WeightVersionSpan: output tokens [start, end) were
// sampled by weights labelled version.
type weightSpan struct {
	Version string `json:"version"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// addToken extends spans with the next output token, sampled by version v.
func addToken(spans []weightSpan, v string) []weightSpan {
	if n := len(spans); n > 0 && spans[n-1].Version == v {
		spans[n-1].End++
		return spans
	}
	end := 0
	if n := len(spans); n > 0 {
		end = spans[n-1].End
	}
	return append(spans, weightSpan{Version: v, Start: end, End: end + 1})
}
