package responsestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the store every replica shares: one Redis key per value, its
// ttl Redis's own expiry. What it relies on to keep an acknowledged value
// across a Redis restart is the server's persistence (appendonly yes with
// appendfsync everysec or always: docs/responses-messages.md).
type Redis struct {
	client   *redis.Client
	prefix   string
	maxBytes int64
}

// RedisOptions configure a Redis store.
type RedisOptions struct {
	// URL is redis://[user:password@]host:port[/db] (rediss:// for TLS).
	URL string
	// Prefix starts every key (e.g. "coordinator:").
	Prefix string
	// MaxBytes bounds one value (> 0): larger is ErrTooLarge.
	MaxBytes int64
	// Timeout bounds each command (dial, read, write); 0: go-redis's.
	Timeout time.Duration
}

// NewRedis connects lazily to the Redis of o.URL: a URL that does not
// parse is an error, a server that does not answer is ErrUnavailable at
// the first command.
func NewRedis(o RedisOptions) (*Redis, error) {
	opts, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("responsestore: redis url: %w", err)
	}
	if o.Timeout > 0 {
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	}
	return &Redis{client: redis.NewClient(opts), prefix: o.Prefix, maxBytes: o.MaxBytes}, nil
}

// Close closes the client's connections.
func (r *Redis) Close() error { return r.client.Close() }

// Ping reports whether the server answers (ErrUnavailable when not).
func (r *Redis) Ping(ctx context.Context) error { return unavailable(r.client.Ping(ctx).Err()) }

// Put implements Store.
func (r *Redis) Put(ctx context.Context, key Key, value []byte, ttl time.Duration) error {
	if int64(len(value)) > r.maxBytes {
		return ErrTooLarge
	}
	return unavailable(r.client.Set(ctx, r.prefix+key.String(), value, ttl).Err())
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, key Key) ([]byte, error) {
	v, err := r.client.Get(ctx, r.prefix+key.String()).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	return v, unavailable(err)
}

// updateAttempts bounds the optimistic transactions of one Update: each
// retry follows another client's write of the same key.
const updateAttempts = 16

// ErrContended is Update's answer when other writers of the key aborted
// every one of its attempts.
var ErrContended = errors.New("responsestore: update contended")

// Update implements Store with an optimistic transaction: WATCH the key,
// GET it, fn, then MULTI SET EXEC, which Redis aborts when another client
// wrote the key after the WATCH; the attempt is then retried (fn runs
// again on the new value), at most updateAttempts times.
func (r *Redis) Update(ctx context.Context, key Key, ttl time.Duration, fn func(old []byte) ([]byte, error)) error {
	k := r.prefix + key.String()
	txf := func(tx *redis.Tx) error {
		old, err := tx.Get(ctx, k).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		value, err := fn(old)
		if err != nil {
			return fnError{err}
		}
		if int64(len(value)) > r.maxBytes {
			return fnError{ErrTooLarge}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, value, ttl)
			return nil
		})
		return err
	}
	for range updateAttempts {
		err := r.client.Watch(ctx, txf, k)
		var fe fnError
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case errors.As(err, &fe):
			return fe.err
		}
		return unavailable(err)
	}
	return ErrContended
}

// fnError carries an error of Update's fn (or its size check) out of the
// transaction, told apart from Redis's own.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, key Key) error {
	n, err := r.client.Del(ctx, r.prefix+key.String()).Result()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// unavailable wraps a failure to reach Redis as ErrUnavailable; nil stays
// nil, and a caller's cancellation stays itself.
func unavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: redis: %w", ErrUnavailable, err)
}
