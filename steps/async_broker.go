package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// AsyncBrokerType is the async-broker step's config name.
const AsyncBrokerType = "async-broker"

// startupTimeout bounds the startup ping and notification probe.
const startupTimeout = 5 * time.Second

// maxUnroutedModels caps the set of models logged once at info when no
// route matches them (model names come from clients).
const maxUnroutedModels = 1024

// AsyncBroker bridges the pipeline to the llm-d-async processor through
// Redis (compat §7.7). A request opts in with the mode header:
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
// Answers of the queued modes and every refusal (400, with the OpenAI
// error envelope) end the pipeline. The step must be the first of the
// pipeline (NewPipeline enforces it). It keeps the queued requests'
// results for GetRequest and DeleteRequest (RequestStore) and holds a
// Redis client until Close.
type AsyncBroker struct {
	p   asyncBrokerParams
	rdb *redis.Client
	log *slog.Logger
	// notifier wakes waits on keyspace notifications; nil: polling only.
	notifier *notifier

	// Header names, lowercased once.
	modeHeader, tenantHeader, timeoutHeader string
	objectiveHeader, fairnessHeader         string
	// forward holds forward_headers as configured and lowercased.
	forward [][2]string

	waitCap, fetchGrace        time.Duration
	pollEvery, backupPollEvery time.Duration
	// parked, when set (tests), runs each time a wait found no result and
	// is about to block.
	parked func()

	// bg counts work that outlives Execute (quota releases).
	bg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	unroutedMu sync.Mutex
	unrouted   map[string]struct{}
}

// NewAsyncBrokerPlugin registers the async-broker step type. Building the
// step connects to Redis: an unreachable server (5 s ping) fails startup.
func NewAsyncBrokerPlugin(log *slog.Logger) Plugin {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Plugin{Type: AsyncBrokerType, New: func(raw map[string]any) (Step, error) {
		p, err := decodeAsyncBrokerParams(raw)
		if err != nil {
			return nil, err
		}
		return newAsyncBroker(p, log)
	}}
}

func newAsyncBroker(p asyncBrokerParams, log *slog.Logger) (*AsyncBroker, error) {
	opts, err := redis.ParseURL(p.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis_url: %w", err)
	}
	rdb := redis.NewClient(opts)
	ctx, stop := context.WithTimeout(context.Background(), startupTimeout)
	defer stop()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis_url: redis at %s unreachable: %w", opts.Addr, err)
	}
	b := &AsyncBroker{
		p:               p,
		rdb:             rdb,
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
		unrouted:        make(map[string]struct{}),
	}
	for _, h := range p.ForwardHeaders {
		b.forward = append(b.forward, [2]string{h, strings.ToLower(h)})
	}
	switch {
	case p.WakeupMode == wakeupNotify:
		b.notifier = newNotifier(rdb, opts.DB)
	case p.WakeupMode == wakeupAuto && notificationsEnabled(ctx, rdb):
		b.notifier = newNotifier(rdb, opts.DB)
		log.Info("async-broker: waits wake up on keyspace notifications", "redis", opts.Addr)
	case p.WakeupMode == wakeupAuto:
		log.Info("async-broker: redis keyspace notifications are off (notify-keyspace-events needs K and l), waits poll", "redis", opts.Addr)
	}
	return b, nil
}

// Execute implements Step.
func (b *AsyncBroker) Execute(ctx context.Context, rc *RequestContext) error {
	raw := rc.Header.Get(b.modeHeader)
	if raw == "" {
		return nil
	}
	mode := strings.ToLower(raw)
	switch mode {
	case modePassthrough, modeEnqueue, modeWait:
	default:
		return b.answer(rc, invalidAnswer(fmt.Sprintf("unknown %s value", b.p.ModeHeader)))
	}
	if rc.Stream && mode != modePassthrough {
		return b.answer(rc, invalidAnswer("stream is only supported in passthrough mode"))
	}
	if rc.Model == "" {
		return b.answer(rc, invalidAnswer("model is required"))
	}
	// Keys join tenant and id with ":"; ids cannot hold one, tenants must
	// not either, or one tenant's keys could alias another's.
	tenant := rc.Header.Get(b.tenantHeader)
	if tenant == "" {
		tenant = defaultTenant
	}
	if strings.Contains(tenant, ":") {
		return b.answer(rc, invalidAnswer(fmt.Sprintf("%s must not contain %q", b.p.TenantHeader, ":")))
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
func (b *AsyncBroker) passthrough(ctx context.Context, rc *RequestContext, tenant string) {
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
// has the envelope; a failed submission is a 503.
func (b *AsyncBroker) enqueue(ctx context.Context, rc *RequestContext, mode, tenant string) error {
	deadline := b.p.deadline(mode, rc.Header.Get(b.timeoutHeader))
	queue, _ := b.route(ctx, rc.Model, tenant)
	now := time.Now()
	s := &submission{
		tenant:   tenant,
		id:       rc.RequestID,
		queue:    queue,
		created:  now,
		deadline: now.Add(deadline),
		payload:  rc.Body,
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
		return b.answer(rc, errorAnswer(http.StatusServiceUnavailable, typeAPI, codeEnqueueFailed, "request could not be queued: broker unavailable"))
	}
	if mode == modeEnqueue {
		return b.answer(rc, pendingAnswer(rc.RequestID))
	}
	return b.wait(ctx, rc, tenant, deadline)
}

// answer writes a to the client and ends the pipeline.
func (b *AsyncBroker) answer(rc *RequestContext, a Answer) error {
	if err := rc.Sink.Response(a.Status, a.ContentType, a.Body); err != nil {
		return fmt.Errorf("async-broker: %w", err)
	}
	return ErrDone
}

// route resolves the request's queue and tier. Falling through to the
// defaults is legitimate but often a typo: the first time per model it
// logs at info, then at debug.
func (b *AsyncBroker) route(ctx context.Context, model, tenant string) (queue, tier string) {
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
func (b *AsyncBroker) firstUnrouted(model string) bool {
	b.unroutedMu.Lock()
	defer b.unroutedMu.Unlock()
	if _, seen := b.unrouted[model]; seen || len(b.unrouted) >= maxUnroutedModels {
		return false
	}
	b.unrouted[model] = struct{}{}
	return true
}

// Holds implements RequestStore: requests in wait mode are held open.
func (b *AsyncBroker) Holds(header headers.Forwarded) bool {
	return strings.EqualFold(header.Get(b.modeHeader), modeWait)
}

// Close implements io.Closer: it ends the notification subscription,
// waits for the quota releases of ended requests, and closes the Redis
// client. Call it after the last request ended; later calls return the
// first's result.
func (b *AsyncBroker) Close() error {
	b.closeOnce.Do(func() {
		var errs []error
		if b.notifier != nil {
			errs = append(errs, b.notifier.close())
		}
		b.bg.Wait()
		errs = append(errs, b.rdb.Close())
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// checkAsyncBrokerFirst fails unless async-broker, when configured, is the
// first step: its mode header decides whether the other steps run at all.
// The reference only documents this; the coordinator enforces it.
func checkAsyncBrokerFirst(configs []StepConfig) error {
	for i, c := range configs {
		if c.Type == AsyncBrokerType && i > 0 {
			return fmt.Errorf("pipeline.steps[%d]: %s must be the first step", i, AsyncBrokerType)
		}
	}
	return nil
}

// Interface guards.
var (
	_ Step         = (*AsyncBroker)(nil)
	_ RequestStore = (*AsyncBroker)(nil)
	_ io.Closer    = (*AsyncBroker)(nil)
)
