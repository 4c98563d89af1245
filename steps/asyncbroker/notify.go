package asyncbroker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// notifier wakes waits when their mailbox is written, from Redis keyspace
// notifications: one pattern subscription per step on
// __keyspace@<db>__:results:req:*, opened by the first wait and kept (and
// resubscribed by go-redis after a reconnect) until Close. Every replica
// sees every mailbox event; that is one small message per result, and it
// spares each wait a subscribe and unsubscribe round trip.
type notifier struct {
	rdb     *redis.Client
	pattern string // __keyspace@<db>__:results:req:*
	prefix  string // __keyspace@<db>__:

	mu      sync.Mutex
	pubsub  *redis.PubSub // nil until the first wait
	closed  bool
	done    chan struct{} // closed when the dispatch loop ends
	waiters map[string][]chan struct{}
}

func newNotifier(rdb *redis.Client, db int) *notifier {
	prefix := fmt.Sprintf("__keyspace@%d__:", db)
	return &notifier{
		rdb:     rdb,
		pattern: prefix + resultKeyPrefix + "*",
		prefix:  prefix,
		waiters: make(map[string][]chan struct{}),
	}
}

// notificationsEnabled reports whether the server publishes keyspace
// events for lists: notify-keyspace-events has K, and l or A.
func notificationsEnabled(ctx context.Context, rdb *redis.Client) bool {
	res, err := rdb.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		return false
	}
	flags := res["notify-keyspace-events"]
	return strings.Contains(flags, "K") && strings.ContainsAny(flags, "lA")
}

// errNotifierClosed is register's error after Close.
var errNotifierClosed = errors.New("notifier closed")

// register returns a channel that receives a signal when key's mailbox is
// written, and the function that stops it. The subscription is confirmed
// before register returns, so a write after it is never missed; callers
// look at the mailbox after registering.
func (n *notifier) register(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := n.start(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.waiters[key] = append(n.waiters[key], ch)
	n.mu.Unlock()
	return ch, func() { n.leave(key, ch) }, nil
}

// start opens the pattern subscription once.
func (n *notifier) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return errNotifierClosed
	case n.pubsub != nil:
		return nil
	}
	ps := n.rdb.PSubscribe(ctx, n.pattern)
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		_ = ps.Close()
		return fmt.Errorf("psubscribe: %w", err)
	}
	n.pubsub, n.done = ps, make(chan struct{})
	go n.dispatch(ps.Channel(), n.done)
	return nil
}

// dispatch signals the waiters of each written mailbox until the
// subscription closes.
func (n *notifier) dispatch(msgs <-chan *redis.Message, done chan<- struct{}) {
	defer close(done)
	for msg := range msgs {
		key, ok := strings.CutPrefix(msg.Channel, n.prefix)
		if !ok {
			continue
		}
		n.mu.Lock()
		for _, ch := range n.waiters[key] {
			select {
			case ch <- struct{}{}:
			default: // already signalled
			}
		}
		n.mu.Unlock()
	}
}

func (n *notifier) leave(key string, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	list := slices.DeleteFunc(n.waiters[key], func(c chan struct{}) bool { return c == ch })
	if len(list) == 0 {
		delete(n.waiters, key)
		return
	}
	n.waiters[key] = list
}

// close ends the subscription and waits for the dispatch loop.
func (n *notifier) close() error {
	n.mu.Lock()
	n.closed = true
	ps, done := n.pubsub, n.done
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
