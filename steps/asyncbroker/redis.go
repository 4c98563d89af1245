package asyncbroker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps"
)

// The broker's Redis data model (llm-d-async v0.9.0, compat §7.7). A
// request's envelope id is "<tenant>:<id>"; the async processor derives
// the active and cancel keys from it, so they are tenant-scoped too.
const (
	// resultKeyPrefix + "<tenant>:<id>" is the request's mailbox: a list
	// the async processor LPUSHes one ResultMessage onto.
	resultKeyPrefix = "results:req:"
	// activeKeyPrefix + envelope id holds the submission's random token
	// until the deadline: its presence means "pending".
	activeKeyPrefix = "request-active:"
	// cancelKeyPrefix + envelope id holds the token of a cancelled
	// submission, for the processor to drop it before dispatch.
	cancelKeyPrefix = "request-cancel:"
)

// cancelMarkerTTL is how long a cancellation marker lives.
const cancelMarkerTTL = 7 * 24 * time.Hour

// cleanupTimeout bounds the Redis calls made after the client is gone or
// answered (cancel, release, mailbox cleanup).
const cleanupTimeout = 5 * time.Second

func resultKey(tenant, id string) string  { return resultKeyPrefix + tenant + ":" + id }
func envelopeID(tenant, id string) string { return tenant + ":" + id }

// submitScript queues one envelope atomically: it clears a stale
// cancellation marker of the id (a resubmission must not inherit it),
// sets the active token until the deadline and adds the envelope to the
// queue scored by its deadline.
//
// KEYS: cancel key, active key, queue. ARGV: token, active TTL in ms,
// deadline (unix s), envelope.
var submitScript = redis.NewScript(`
redis.call("DEL", KEYS[1])
redis.call("SET", KEYS[2], ARGV[1], "PX", ARGV[2])
redis.call("ZADD", KEYS[3], ARGV[3], ARGV[4])
return 1
`)

// cancelScript marks a submission cancelled: the active token is copied to
// the cancel key, so only a still-active submission can be cancelled.
//
// KEYS: active key, cancel key. ARGV: marker TTL in seconds.
var cancelScript = redis.NewScript(`
local active = redis.call("GET", KEYS[1])
if not active then
  return 0
end
redis.call("SET", KEYS[2], active, "EX", ARGV[1])
return 1
`)

// submission is one queued request, as the envelope describes it.
type submission struct {
	tenant   string
	id       string
	queue    string
	created  time.Time
	deadline time.Time
	payload  []byte            // the client's JSON body, verbatim
	metadata map[string]string // quota attribute → tenant, traceparent
	headers  map[string]string // the forward_headers the client sent
	endpoint string
}

// envelope encodes s as llm-d-async's tagged Redis envelope with token:
//
//	{"internal":{"request_token","request_queue_name","result_queue_name"},
//	 "request_kind":"redis",
//	 "data":{"id","created","deadline","payload","metadata","headers",
//	         "endpoint","request_queue_name","result_queue_name"}}
//
// The payload is the client's body byte for byte; map keys are sorted.
func (s *submission) envelope(token string) []byte {
	mailbox := resultKey(s.tenant, s.id)
	b := make([]byte, 0, len(s.payload)+512)
	b = append(b, `{"internal":{"request_token":`...)
	b = jsonbody.AppendString(b, token)
	b = append(b, `,"request_queue_name":`...)
	b = jsonbody.AppendString(b, s.queue)
	b = append(b, `,"result_queue_name":`...)
	b = jsonbody.AppendString(b, mailbox)
	b = append(b, `},"request_kind":"redis","data":{"id":`...)
	b = jsonbody.AppendString(b, envelopeID(s.tenant, s.id))
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, s.created.Unix(), 10)
	b = append(b, `,"deadline":`...)
	b = strconv.AppendInt(b, s.deadline.Unix(), 10)
	b = append(b, `,"payload":`...)
	b = append(b, s.payload...)
	b = appendStringMap(b, "metadata", s.metadata)
	b = appendStringMap(b, "headers", s.headers)
	b = append(b, `,"endpoint":`...)
	b = jsonbody.AppendString(b, s.endpoint)
	b = append(b, `,"request_queue_name":`...)
	b = jsonbody.AppendString(b, s.queue)
	b = append(b, `,"result_queue_name":`...)
	b = jsonbody.AppendString(b, mailbox)
	return append(b, "}}"...)
}

// appendStringMap appends `,"name":{...}` with sorted keys; nothing when m
// is empty (the envelope's omitempty).
func appendStringMap(b []byte, name string, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":{`...)
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonbody.AppendString(b, k)
		b = append(b, ':')
		b = jsonbody.AppendString(b, m[k])
	}
	return append(b, '}')
}

// submit queues s: one atomic script (see submitScript). Nothing is
// acknowledged to the client unless it returns nil.
func (b *Broker) submit(ctx context.Context, s *submission) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	ttl := time.Until(s.deadline).Milliseconds()
	if ttl <= 0 {
		return errors.New("deadline already passed")
	}
	eid := envelopeID(s.tenant, s.id)
	keys := []string{cancelKeyPrefix + eid, activeKeyPrefix + eid, s.queue}
	return submitScript.Run(ctx, b.rdb, keys, token, ttl, s.deadline.Unix(), s.envelope(token)).Err()
}

// cancel marks the request cancelled for the processor (best effort: it
// runs after the client went away, so on a context of its own).
func (b *Broker) cancel(ctx context.Context, tenant, id string) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	eid := envelopeID(tenant, id)
	err := cancelScript.Run(ctx, b.rdb, []string{activeKeyPrefix + eid, cancelKeyPrefix + eid}, int64(cancelMarkerTTL/time.Second)).Err()
	if err != nil {
		b.log.WarnContext(ctx, "async-broker: cancel abandoned request", "request_id", id, "tenant", tenant, "error", err)
	}
}

// newToken is a submission's random 16-byte hex token.
func newToken() (string, error) {
	var t [16]byte
	if _, err := rand.Read(t[:]); err != nil {
		return "", fmt.Errorf("request token: %w", err)
	}
	return hex.EncodeToString(t[:]), nil
}

// result reads the request's mailbox without consuming it: found is false
// while it is empty.
func (b *Broker) result(ctx context.Context, tenant, id string) (a steps.Answer, found bool, err error) {
	vals, err := b.rdb.LRange(ctx, resultKey(tenant, id), 0, 0).Result()
	if err != nil {
		return steps.Answer{}, false, fmt.Errorf("read result: %w", err)
	}
	if len(vals) == 0 {
		return steps.Answer{}, false, nil
	}
	a, err = resultAnswer([]byte(vals[0]))
	return a, err == nil, err
}
