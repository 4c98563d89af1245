// Package asyncbroker is the async-broker step: it bridges the pipeline
// to the llm-d-async processor through Redis (compat §7.7), queuing
// requests, holding waiting clients and serving stored results.
//
// One concern per file: broker.go the step and its lifecycle, params.go
// its config, redis.go the Redis data model and scripts, quota.go the
// passthrough classification, wait.go the held clients, notify.go their
// keyspace-notification wake-ups, store.go GetRequest/DeleteRequest,
// answer.go its answers and refusals.
package asyncbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
)

// Type is the async-broker step's config name.
const Type = "async-broker"

// startupTimeout bounds the startup ping and notification probe.
const startupTimeout = 5 * time.Second

// maxUnroutedModels caps the set of models logged once at info when no
// route matches them (model names come from clients).
const maxUnroutedModels = 1024

// Broker bridges the pipeline to the llm-d-async processor through Redis
// (compat §7.7). A request opts in with the mode header:
//
//   - none: untouched, the pipeline goes on (the processor's own dispatches
//     re-enter this way);
//   - passthrough: classified against the tenant's reserved concurrency,
//     stamped with the objective and fairness headers, then served by the
//     rest of the pipeline;
//   - enqueue: queued for the processor and answered 202 with its id;
//   - wait: queued, and the client held until the result, the deadline
//     (504) or the wait cap (202).
//
// Answers of the queued modes and every refusal (a *steps.Refusal, which
// the service frames) end the pipeline.
//
// The step must run first (steps.FirstStep), holds wait-mode requests
// open (steps.Holder) and keeps the queued requests' results for
// GetRequest and DeleteRequest (steps.RequestStore). Its Redis client is
// opened by Start and closed by Stop (steps.Starter, steps.Stopper): the
// step serves requests only between the two.
type Broker struct {
	p    brokerParams
	opts *redis.Options // from redis_url
	log  *slog.Logger

	// Set by Start.
	rdb *redis.Client
	// notifier wakes waits on keyspace notifications; nil: polling only.
	notifier *notifier

	// Header names, lowercased once.
	modeHeader, tenantHeader, timeoutHeader string
	objectiveHeader, fairnessHeader         string
	// forward holds forward_headers as configured and lowercased.
	forward [][2]string

	waitCap, fetchGrace        time.Duration
	pollEvery, backupPollEvery time.Duration
	// startupTimeout bounds Start's Redis calls (startupTimeout; tests
	// shorten it).
	startupTimeout time.Duration
	// parked, when set (tests), runs each time a wait found no result and
	// is about to block.
	parked func()

	// bg counts work that outlives Execute (quota releases).
	bg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error

	unroutedMu sync.Mutex
	unrouted   map[string]struct{}
}

// NewPlugin registers the async-broker step type. Building the step only
// decodes and validates its params; Start connects to Redis.
func NewPlugin(log *slog.Logger) steps.Plugin {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return steps.Plugin{Type: Type, New: func(raw map[string]any) (steps.Step, error) {
		p, err := decodeParams(raw)
		if err != nil {
			return nil, err
		}
		return newBroker(p, log)
	}}
}

// newBroker builds the step for p, which decodeParams validated. It starts
// nothing.
func newBroker(p brokerParams, log *slog.Logger) (*Broker, error) {
	opts, err := redis.ParseURL(p.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis_url: %w", err)
	}
	b := &Broker{
		p:               p,
		opts:            opts,
		log:             log,
		modeHeader:      strings.ToLower(p.ModeHeader),
		tenantHeader:    strings.ToLower(p.TenantHeader),
		timeoutHeader:   strings.ToLower(p.TimeoutHeader),
		objectiveHeader: strings.ToLower(p.ObjectiveHeader),
		fairnessHeader:  strings.ToLower(p.FairnessHeader),
		waitCap:         time.Duration(p.WaitCapSeconds) * time.Second,
		fetchGrace:      time.Duration(p.FetchGraceSeconds) * time.Second,
		pollEvery:       pollInterval,
		backupPollEvery: backupPollInterval,
		startupTimeout:  startupTimeout,
		unrouted:        make(map[string]struct{}),
	}
	for _, h := range p.ForwardHeaders {
		b.forward = append(b.forward, [2]string{h, strings.ToLower(h)})
	}
	return b, nil
}

// Start implements steps.Starter: it opens the Redis client and pings the
// server, then picks the wait wake-up (wakeup_mode auto probes the
// server's notify-keyspace-events). A server that does not answer within
// 5 s (or ctx) fails the start: the coordinator does not come up with a
// broker that cannot queue.
func (b *Broker) Start(ctx context.Context) error {
	ctx, stop := context.WithTimeout(ctx, b.startupTimeout)
	defer stop()
	rdb := redis.NewClient(b.opts)
	if err := ping(ctx, rdb); err != nil {
		_ = rdb.Close()
		return fmt.Errorf("redis_url: redis at %s unreachable: %w", b.opts.Addr, err)
	}
	b.rdb = rdb
	switch {
	case b.p.WakeupMode == wakeupNotify:
		b.notifier = newNotifier(rdb, b.opts.DB)
	case b.p.WakeupMode == wakeupAuto && notificationsEnabled(ctx, rdb):
		b.notifier = newNotifier(rdb, b.opts.DB)
		b.log.Info("async-broker: waits wake up on keyspace notifications", "redis", b.opts.Addr)
	case b.p.WakeupMode == wakeupAuto:
		b.log.Info("async-broker: redis keyspace notifications are off (notify-keyspace-events needs K and l), waits poll", "redis", b.opts.Addr)
	}
	return nil
}

// ping is rdb's PING bounded by ctx. go-redis bounds its reads by
// read_timeout, not by the context, and retries: a server that accepts
// and never answers would hold the start for several read timeouts, so on
// ctx's end the client is closed, which ends the PING at once.
func ping(ctx context.Context, rdb *redis.Client) error {
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(ctx).Err() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = rdb.Close()
		<-done
		return context.Cause(ctx)
	}
}

// Stop implements steps.Stopper: it ends the notification subscription,
// waits for the quota releases of ended requests (until ctx ends), and
// closes the Redis client. Call it after the last request ended; later
// calls return the first's result. Stopping a step that did not start
// does nothing.
func (b *Broker) Stop(ctx context.Context) error {
	b.stopOnce.Do(func() {
		if b.rdb == nil {
			return
		}
		var errs []error
		if b.notifier != nil {
			errs = append(errs, b.notifier.close())
		}
		released := make(chan struct{})
		go func() { b.bg.Wait(); close(released) }()
		select {
		case <-released:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("quota releases: %w", context.Cause(ctx)))
		}
		errs = append(errs, b.rdb.Close())
		b.stopErr = errors.Join(errs...)
	})
	return b.stopErr
}

// Execute implements Step.
func (b *Broker) Execute(ctx context.Context, rc *steps.RequestContext) error {
	raw := rc.Header.Get(b.modeHeader)
	if raw == "" {
		return nil
	}
	mode := strings.ToLower(raw)
	switch mode {
	case modePassthrough, modeEnqueue, modeWait:
	default:
		return invalid(fmt.Sprintf("unknown %s value", b.p.ModeHeader))
	}
	if rc.Stream && mode != modePassthrough {
		return invalid("stream is only supported in passthrough mode")
	}
	if rc.Model == "" {
		return invalid("model is required")
	}
	// Keys join tenant and id with ":"; ids cannot hold one, tenants must
	// not either, or one tenant's keys could alias another's.
	tenant := rc.Header.Get(b.tenantHeader)
	if tenant == "" {
		tenant = defaultTenant
	}
	if strings.Contains(tenant, ":") {
		return invalid(fmt.Sprintf("%s must not contain %q", b.p.TenantHeader, ":"))
	}
	if mode == modePassthrough {
		b.passthrough(ctx, rc, tenant)
		return nil
	}
	return b.enqueue(ctx, rc, mode, tenant)
}

// passthrough classifies the request, holds its quota slot until ctx ends
// (the request's end, or its client's cancel, even after the pipeline
// returned) and stamps the identity headers every leg forwards: the
// client's own objective and fairness headers are replaced, never trusted.
func (b *Broker) passthrough(ctx context.Context, rc *steps.RequestContext, tenant string) {
	class, release := b.classify(ctx, tenant)
	if release != nil {
		b.bg.Add(1)
		context.AfterFunc(ctx, func() {
			defer b.bg.Done()
			release()
		})
	}
	_, tier := b.route(ctx, rc.Model, tenant)
	rc.Header.Del(b.objectiveHeader)
	rc.Header.Del(b.fairnessHeader)
	if o, ok := b.p.Objectives[tier]; ok {
		name := o.Reserved
		if class == classOverflow {
			name = o.Overflow
		}
		if name != "" {
			rc.Header.Set(b.objectiveHeader, name)
		}
	}
	rc.Header.Set(b.fairnessHeader, tenant)
}

// enqueue submits the request to its routed queue, then answers 202
// (enqueue) or holds the client (wait). The 202 goes out only once Redis
// has the envelope; a failed submission is refused with a 503.
func (b *Broker) enqueue(ctx context.Context, rc *steps.RequestContext, mode, tenant string) error {
	deadline := b.p.deadline(mode, rc.Header.Get(b.timeoutHeader))
	queue, _ := b.route(ctx, rc.Model, tenant)
	// The body as it stands: the service removed what the client may not
	// set (its transfer params) from the document; else the client's bytes.
	doc, err := rc.Document()
	if err != nil {
		return err
	}
	now := time.Now()
	s := &submission{
		tenant:   tenant,
		id:       rc.RequestID,
		queue:    queue,
		created:  now,
		deadline: now.Add(deadline),
		payload:  doc.Bytes(),
		metadata: map[string]string{b.p.Quota.Attribute: tenant},
		endpoint: rc.Format.Path(),
	}
	if tp := rc.Header.Get("traceparent"); tp != "" {
		s.metadata["traceparent"] = tp
	}
	for _, h := range b.forward {
		if v := rc.Header.Get(h[1]); v != "" {
			if s.headers == nil {
				s.headers = make(map[string]string, len(b.forward))
			}
			s.headers[h[0]] = v // named as configured, as the reference does
		}
	}
	if err := b.submit(ctx, s); err != nil {
		b.log.WarnContext(ctx, "async-broker: enqueue", "request_id", rc.RequestID, "tenant", tenant, "queue", queue, "error", err)
		return enqueueFailed()
	}
	if mode == modeEnqueue {
		return b.answer(rc, pendingAnswer(rc.RequestID))
	}
	return b.wait(ctx, rc, tenant, deadline)
}

// answer ends the pipeline with a: a body written to the client, or a
// refusal returned for the service to write.
func (b *Broker) answer(rc *steps.RequestContext, a steps.Answer) error {
	if a.Refusal != nil {
		return a.Refusal
	}
	if err := rc.Sink.Response(a.Status, a.ContentType, a.Body); err != nil {
		return fmt.Errorf("async-broker: %w", err)
	}
	return steps.ErrDone
}

// route resolves the request's queue and tier. Falling through to the
// defaults is legitimate but often a typo: the first time per model it
// logs at info, then at debug.
func (b *Broker) route(ctx context.Context, model, tenant string) (queue, tier string) {
	queue, tier, matched := b.p.route(model, tenant)
	if !matched {
		level := slog.LevelDebug
		if b.firstUnrouted(model) {
			level = slog.LevelInfo
		}
		b.log.Log(ctx, level, "async-broker: no route matched, serving from defaults",
			"model", model, "tenant", tenant, "queue", queue, "tier", tier)
	}
	return queue, tier
}

// firstUnrouted records model and reports whether it is new and fits the
// capped set.
func (b *Broker) firstUnrouted(model string) bool {
	b.unroutedMu.Lock()
	defer b.unroutedMu.Unlock()
	if _, seen := b.unrouted[model]; seen || len(b.unrouted) >= maxUnroutedModels {
		return false
	}
	b.unrouted[model] = struct{}{}
	return true
}

// RunsFirst implements steps.FirstStep: the mode header decides whether
// the other steps run at all. The reference only documents this; the
// coordinator enforces it.
func (*Broker) RunsFirst() {}

// Holds implements steps.Holder: requests in wait mode are held open.
func (b *Broker) Holds(header headers.Forwarded) bool {
	return strings.EqualFold(header.Get(b.modeHeader), modeWait)
}

// Interface guards.
var (
	_ steps.Step         = (*Broker)(nil)
	_ steps.FirstStep    = (*Broker)(nil)
	_ steps.Starter      = (*Broker)(nil)
	_ steps.Stopper      = (*Broker)(nil)
	_ steps.Holder       = (*Broker)(nil)
	_ steps.RequestStore = (*Broker)(nil)
)
