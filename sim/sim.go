package sim

import (
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModel is the served model name when [Options.Models] is empty.
const DefaultModel = "sim-model"

// Defaults applied by [New] to zero-valued options.
const (
	DefaultOutputTokens = 16
	DefaultMaxLegs      = 10_000
	DefaultMaxLegBytes  = 64 << 20
	DefaultMaxBodyBytes = 64 << 20
)

// Limits of the simulated model and service.
const (
	// MaxModelLen is the simulated context length: max_tokens above it is
	// rejected, and render fills sampling_params.max_tokens up to it.
	MaxModelLen = 131_072
	// memoryCapacity bounds the prefill and served-prompt memories.
	memoryCapacity = 10_000
)

// Options configure a [Sim]. The zero value is usable.
type Options struct {
	// Models are the served model names; other names get 404 like vLLM.
	// A request without a model uses the first one. Default [DefaultModel].
	Models []string
	// TTFT is the delay before the first token on decode (and the direct
	// worker). Default 0.
	TTFT time.Duration
	// TokenDelay is the delay between streamed tokens. Default 0.
	TokenDelay time.Duration
	// OutputTokens is the number of tokens generated when the request sets
	// no max_tokens; finish_reason is then "stop". Default 16.
	OutputTokens int
	// Strict rejects legs that break the coordinator's wire contract.
	Strict bool
	// PromptTokensDetails reports usage.prompt_tokens_details.cached_tokens
	// (the prefix-cache hits) like vLLM's --enable-prompt-tokens-details.
	// Default false, as vLLM's.
	PromptTokensDetails bool
	// MaxLegs bounds the leg log to the most recent legs. 0 means
	// [DefaultMaxLegs]; negative disables recording.
	MaxLegs int
	// MaxLegBytes bounds the bodies kept by the leg log (oldest legs are
	// dropped first; the newest is always kept). 0 means [DefaultMaxLegBytes].
	MaxLegBytes int
	// MaxBodyBytes caps every request body (413 above it). 0 means
	// [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// Now is the clock behind the "created" fields. Default time.Now.
	Now func() time.Time
	// OnLegEnd, if set, is called when the request context of a gateway
	// or render leg ends (see [LegEnd]), from a goroutine of its own: tests
	// measure with it how soon a cancelled client's legs are torn down.
	OnLegEnd func(LegEnd)
	// Engines is the number of engines per role behind the gateway (see
	// [Engine]); a zero count means one, so the zero value is one engine
	// per role.
	Engines EngineCounts
	// WorldSize is what every engine's GET /get_world_size answers.
	// Default 1.
	WorldSize int
	// SessionAffinity is the gateway's session affinity, as the llm-d
	// EPP's strategies do it. SessionByID binds the value of a leg's
	// x-session-id to the engine its first leg of each role went to, and
	// sends the session's later legs of that role there while it is up.
	// SessionByToken writes x-session-token, the base64 of the engine's
	// ID, on every worker answer, and sends a leg that carries one naming
	// an engine of its role that is up to that engine. "" (the default):
	// round robin only.
	SessionAffinity string
}

// The Options.SessionAffinity strategies, named as the llm-d EPP names
// them.
const (
	SessionByID    = "session_id"
	SessionByToken = "encoded_endpoint_header"
)

// Sim is a simulated gateway, worker pools and render service. All methods
// are safe for concurrent use; the handlers share the state of one Sim.
type Sim struct {
	opts   Options
	models []string
	legs   *legLog
	// prefilled remembers, per x-request-id, the prefill that ran for it.
	prefilled *memory[string, prefillRecord]
	// served remembers prompt keys the decode or prefill pool has served.
	served *memory[uint64, struct{}]
	// prefillCache and decodeCache are the pools' prefix caches.
	prefillCache, decodeCache *prefixCache
	seed                      maphash.Seed
	nextID                    atomic.Uint64
	// faults counts the legs hit by faults limited to the first n.
	faults faultCounts
	// engines are the engines of each role; nextEngine their round robin.
	engines       [roleDecode + 1][]*engine
	nextEngine    [roleDecode + 1]atomic.Uint64
	engineServers sync.WaitGroup
	// sessions binds a session id to an engine per role (SessionByID).
	sessionsMu sync.Mutex
	sessions   [roleDecode + 1]map[string]*engine
}

// New returns a simulator; it starts nothing.
func New(opts Options) *Sim {
	if len(opts.Models) == 0 {
		opts.Models = []string{DefaultModel}
	}
	opts.Models = slices.Clone(opts.Models)
	if opts.OutputTokens <= 0 {
		opts.OutputTokens = DefaultOutputTokens
	}
	if opts.TTFT < 0 {
		opts.TTFT = 0
	}
	if opts.TokenDelay < 0 {
		opts.TokenDelay = 0
	}
	if opts.MaxLegs == 0 {
		opts.MaxLegs = DefaultMaxLegs
	}
	if opts.MaxLegBytes <= 0 {
		opts.MaxLegBytes = DefaultMaxLegBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.WorldSize <= 0 {
		opts.WorldSize = 1
	}
	seed := maphash.MakeSeed()
	s := &Sim{
		opts:   opts,
		models: opts.Models,
		legs:   newLegLog(opts.MaxLegs, opts.MaxLegBytes),
		prefilled: newMemory[string, prefillRecord](memoryCapacity, func(k string) uint64 {
			return maphash.String(seed, k)
		}),
		served:       newMemory[uint64, struct{}](memoryCapacity, func(k uint64) uint64 { return k }),
		prefillCache: newPrefixCache(),
		decodeCache:  newPrefixCache(),
		seed:         seed,
	}
	counts := [...]int{roleEncode: opts.Engines.Encode, rolePrefill: opts.Engines.Prefill, roleDecode: opts.Engines.Decode}
	for rl, n := range counts {
		for i := range max(n, 1) {
			s.engines[rl] = append(s.engines[rl], newEngine(role(rl), i, opts.WorldSize))
		}
	}
	return s
}

// Reset forgets the leg log, the prefills, the served prompts and the
// prefix caches. The engines keep their state (pause, version, sleep).
func (s *Sim) Reset() {
	s.legs.reset()
	s.prefilled.reset()
	s.served.reset()
	s.prefillCache.reset()
	s.decodeCache.reset()
	s.faults.reset()
}

// model resolves the requested model: "" means the first served model.
// ok is false for a model that is not served.
func (s *Sim) model(name string) (string, bool) {
	if name == "" {
		return s.models[0], true
	}
	return name, slices.Contains(s.models, name)
}

// fallbackID numbers responses to requests without any request id.
func (s *Sim) fallbackID() string {
	return "sim-" + strconv.FormatUint(s.nextID.Add(1), 10)
}
