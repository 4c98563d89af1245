package asyncbroker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/internal/params"
)

// The async-broker serving modes, as the mode header spells them
// (case-insensitive).
const (
	// modePassthrough labels the request (quota class, objective and
	// fairness headers) and lets the pipeline serve it.
	modePassthrough = "passthrough"
	// modeEnqueue queues the request and answers 202 at once.
	modeEnqueue = "enqueue"
	// modeWait queues the request and holds the client until the result,
	// the deadline (504) or the wait cap (202).
	modeWait = "wait"
)

// The wait-mode wake-ups (wakeup_mode).
const (
	wakeupAuto   = "auto"
	wakeupNotify = "notify"
	wakeupPoll   = "poll"
)

// Defaults of the async-broker params (compat §7.7).
const (
	defaultModeHeader      = "X-AP-Mode"
	defaultTenantHeader    = "X-Team"
	defaultTimeoutHeader   = "X-Request-Timeout-Seconds"
	defaultQueue           = "request-sortedset"
	defaultObjectiveHeader = "x-llm-d-inference-objective"
	defaultFairnessHeader  = "x-llm-d-inference-fairness-id"
	defaultQuotaPrefix     = "quota:"
	defaultQuotaAttribute  = "userid"
	defaultQuotaWindow     = 300
	defaultFetchGrace      = 60
	defaultWaitSeconds     = 60
	defaultEnqueueSeconds  = 3600
	// defaultTenant is the tenant of a request without the tenant header.
	defaultTenant = "default"
)

// defaultForwardHeaders are the client headers copied onto a queued
// message by default: the gateway's SLO ordering headers.
var defaultForwardHeaders = []string{"x-llm-d-slo-ttft-ms", "x-llm-d-slo-tpot-ms"}

// brokerParams are the async-broker step's params. Every key is
// optional except redis_url; an empty string, like an absent key, takes the
// default.
type brokerParams struct {
	// RedisURL is the broker's Redis, as a redis:// or rediss:// URL
	// (user, password and db number included). Required.
	RedisURL string `param:"redis_url"`
	// ModeHeader selects the serving mode per request. Default X-AP-Mode.
	ModeHeader string `param:"mode_header"`
	// TenantHeader names the tenant; absent means tenant "default".
	// Default X-Team.
	TenantHeader string `param:"tenant_header"`
	// TimeoutHeader carries a client's deadline in whole seconds for the
	// queued modes; a value that is not a positive integer is ignored.
	// Default X-Request-Timeout-Seconds.
	TimeoutHeader string `param:"timeout_header"`
	// Timeouts bounds the deadline per queued mode, keyed "enqueue" or
	// "wait" only.
	Timeouts map[string]modeTimeouts `param:"timeouts"`
	// WaitCapSeconds, when positive, ends a wait before its deadline with
	// 202 pending (the result stays fetchable). 0: hold to the deadline.
	WaitCapSeconds int64 `param:"wait_cap_seconds"`
	// FetchGraceSeconds is the mailbox TTL after a fetched result (room
	// for a retry of a lost answer); 0 deletes it on fetch. Default 60.
	FetchGraceSeconds int64 `param:"fetch_grace_seconds"`
	// Routes pick the queue and tier per request; the first match wins.
	Routes []routeRule `param:"routes"`
	// DefaultQueue is the sorted set of unrouted requests (and of routes
	// without a queue). Default request-sortedset.
	DefaultQueue string `param:"default_queue"`
	// DefaultTier is the tier of unrouted requests (and of routes without
	// a tier). Default "".
	DefaultTier string `param:"default_tier"`
	// Objectives maps a tier to the InferenceObjective names stamped on
	// passthrough requests, by quota class.
	Objectives map[string]tierObjectives `param:"objectives"`
	// ObjectiveHeader carries the objective name. Default
	// x-llm-d-inference-objective.
	ObjectiveHeader string `param:"objective_header"`
	// FairnessHeader carries the tenant as the fairness id. Default
	// x-llm-d-inference-fairness-id.
	FairnessHeader string `param:"fairness_header"`
	// Quota is the passthrough reserved-concurrency classification.
	Quota quotaParams `param:"quota"`
	// ForwardHeaders are client headers copied onto queued messages (the
	// async processor sends them on at dispatch). Default the two SLO
	// headers; never the mode, objective or fairness header.
	ForwardHeaders []string `param:"forward_headers"`
	// WakeupMode is how a wait learns its result landed: "notify" (Redis
	// keyspace notifications, with a 2 s backup poll), "poll" (every
	// 200 ms) or "auto" (notify when the server's notify-keyspace-events
	// has K and l or A, else poll). Default auto.
	WakeupMode string `param:"wakeup_mode"`
}

// modeTimeouts bound a queued mode's deadline, in seconds. 0 (or absent)
// takes the default: 60 s for wait, 3600 s for enqueue, no max.
type modeTimeouts struct {
	DefaultSeconds int64 `param:"default_seconds"`
	MaxSeconds     int64 `param:"max_seconds"`
}

// routeRule maps requests to a queue and a tier. An empty model or
// tenant matches any; an empty queue or tier takes the default.
type routeRule struct {
	Model  string `param:"model"`
	Tenant string `param:"tenant"`
	Queue  string `param:"queue"`
	Tier   string `param:"tier"`
}

// tierObjectives are a tier's objective names by quota class; an empty
// name stamps nothing.
type tierObjectives struct {
	Reserved string `param:"reserved"`
	Overflow string `param:"overflow"`
}

// quotaParams is the passthrough classification. A tenant with a positive
// limit holds one slot of a counter at <prefix><attribute>:<tenant> while
// its request runs; past the limit it is classified overflow (never
// refused). Tenants without a limit are always reserved.
type quotaParams struct {
	// Prefix of the counter keys. Default "quota:".
	Prefix string `param:"prefix"`
	// Attribute names the tenant attribute, in the counter key and as the
	// metadata key of queued messages. Default "userid".
	Attribute string `param:"attribute"`
	// WindowSeconds is the counter's TTL, refreshed on every acquire and
	// release. Default 300.
	WindowSeconds int64 `param:"window_seconds"`
	// Limits maps a tenant to its reserved concurrency.
	Limits map[string]int64 `param:"limits"`
}

// decodeParams decodes raw strictly, fills in the defaults and
// validates.
func decodeParams(raw map[string]any) (brokerParams, error) {
	p := brokerParams{FetchGraceSeconds: defaultFetchGrace}
	if err := params.Decode(raw, &p); err != nil {
		return p, err
	}
	p.applyDefaults()
	return p, p.validate()
}

func (p *brokerParams) applyDefaults() {
	orDefault := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	orDefault(&p.ModeHeader, defaultModeHeader)
	orDefault(&p.TenantHeader, defaultTenantHeader)
	orDefault(&p.TimeoutHeader, defaultTimeoutHeader)
	orDefault(&p.DefaultQueue, defaultQueue)
	orDefault(&p.ObjectiveHeader, defaultObjectiveHeader)
	orDefault(&p.FairnessHeader, defaultFairnessHeader)
	orDefault(&p.Quota.Prefix, defaultQuotaPrefix)
	orDefault(&p.Quota.Attribute, defaultQuotaAttribute)
	orDefault(&p.WakeupMode, wakeupAuto)
	if p.Quota.WindowSeconds == 0 {
		p.Quota.WindowSeconds = defaultQuotaWindow
	}
	if p.ForwardHeaders == nil {
		p.ForwardHeaders = slices.Clone(defaultForwardHeaders)
	}
}

func (p *brokerParams) validate() error {
	if p.RedisURL == "" {
		return errors.New("redis_url is required")
	}
	switch p.WakeupMode {
	case wakeupAuto, wakeupNotify, wakeupPoll:
	default:
		return fmt.Errorf("wakeup_mode must be auto, notify or poll, got %q", p.WakeupMode)
	}
	if p.WaitCapSeconds < 0 {
		return fmt.Errorf("wait_cap_seconds must not be negative, got %d", p.WaitCapSeconds)
	}
	if p.FetchGraceSeconds < 0 {
		return fmt.Errorf("fetch_grace_seconds must not be negative, got %d", p.FetchGraceSeconds)
	}
	for _, mode := range slices.Sorted(maps.Keys(p.Timeouts)) {
		b := p.Timeouts[mode]
		switch {
		case mode != modeEnqueue && mode != modeWait:
			return fmt.Errorf("timeouts: keys must be enqueue or wait, got %q", mode)
		case b.DefaultSeconds < 0 || b.MaxSeconds < 0:
			return fmt.Errorf("timeouts.%s: seconds must not be negative", mode)
		case b.MaxSeconds > 0 && b.DefaultSeconds > b.MaxSeconds:
			return fmt.Errorf("timeouts.%s: default_seconds %d exceeds max_seconds %d", mode, b.DefaultSeconds, b.MaxSeconds)
		}
	}
	if p.Quota.WindowSeconds < 0 {
		return fmt.Errorf("quota.window_seconds must not be negative, got %d", p.Quota.WindowSeconds)
	}
	for _, tenant := range slices.Sorted(maps.Keys(p.Quota.Limits)) {
		if limit := p.Quota.Limits[tenant]; limit < 0 {
			return fmt.Errorf("quota.limits.%s must not be negative, got %d", tenant, limit)
		}
	}
	for _, h := range p.ForwardHeaders {
		for _, owned := range []string{p.ModeHeader, p.ObjectiveHeader, p.FairnessHeader} {
			if strings.EqualFold(h, owned) {
				return fmt.Errorf("forward_headers must not include %s", h)
			}
		}
	}
	return nil
}

// deadline is how long a queued request of mode may take: the mode's
// default, or the client's timeout header when it is a positive integer,
// clamped by the mode's max when one is set.
func (p *brokerParams) deadline(mode, header string) time.Duration {
	b := p.Timeouts[mode]
	secs := b.DefaultSeconds
	if secs <= 0 {
		secs = defaultWaitSeconds
		if mode == modeEnqueue {
			secs = defaultEnqueueSeconds
		}
	}
	if n, ok := positiveSeconds(header); ok {
		secs = n
	}
	if b.MaxSeconds > 0 && secs > b.MaxSeconds {
		secs = b.MaxSeconds
	}
	return time.Duration(secs) * time.Second
}

// positiveSeconds parses a header value of whole seconds, as the reference
// does (strconv.ParseInt), capped at a century so the deadline arithmetic
// cannot overflow.
func positiveSeconds(v string) (int64, bool) {
	const century = 100 * 365 * 24 * 3600
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return min(n, century), true
}

// route resolves a request's queue and tier; matched is false when no
// route matched and the defaults apply.
func (p *brokerParams) route(model, tenant string) (queue, tier string, matched bool) {
	for _, r := range p.Routes {
		if (r.Model == "" || r.Model == model) && (r.Tenant == "" || r.Tenant == tenant) {
			queue, tier = r.Queue, r.Tier
			if queue == "" {
				queue = p.DefaultQueue
			}
			if tier == "" {
				tier = p.DefaultTier
			}
			return queue, tier, true
		}
	}
	return p.DefaultQueue, p.DefaultTier, false
}
