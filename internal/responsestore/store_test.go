package responsestore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// backends are the stores every contract test runs against.
func backends(t *testing.T) map[string]responsestore.Store {
	t.Helper()
	rd := steptest.StartRedis(t)
	r, err := responsestore.NewRedis(responsestore.RedisOptions{URL: rd.URL, Prefix: "test:", MaxBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return map[string]responsestore.Store{
		"memory": responsestore.NewMemory(responsestore.MemoryOptions{MaxBytes: 1 << 20, MaxEntries: 100}),
		"redis":  r,
	}
}

func TestStoreContract(t *testing.T) {
	t.Parallel()
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			id := responsestore.NewID("resp")
			alice := responsestore.Key{Tenant: "alice", Kind: "response", ID: id}
			bob := responsestore.Key{Tenant: "bob", Kind: "response", ID: id}

			_, err := s.Get(ctx, alice)
			assert.ErrorIs(t, err, responsestore.ErrNotFound)
			require.NoError(t, s.Put(ctx, alice, []byte(`{"turn":1}`), time.Minute))
			got, err := s.Get(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, `{"turn":1}`, string(got))

			_, err = s.Get(ctx, bob)
			assert.ErrorIs(t, err, responsestore.ErrNotFound, "another tenant's id is a missing one")
			assert.ErrorIs(t, s.Delete(ctx, bob), responsestore.ErrNotFound, "and cannot be deleted by it")

			require.NoError(t, s.Put(ctx, alice, []byte(`{"turn":2}`), time.Minute))
			got, err = s.Get(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, `{"turn":2}`, string(got), "a put replaces")

			require.NoError(t, s.Delete(ctx, alice))
			_, err = s.Get(ctx, alice)
			assert.ErrorIs(t, err, responsestore.ErrNotFound)
			assert.ErrorIs(t, s.Delete(ctx, alice), responsestore.ErrNotFound)

			assert.ErrorIs(t, s.Put(ctx, alice, make([]byte, 1<<20+1), time.Minute), responsestore.ErrTooLarge)
		})
	}
}

func TestNewIDIsUnguessable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := responsestore.NewID("resp")
		require.True(t, strings.HasPrefix(id, "resp_"))
		require.Len(t, id, len("resp_")+32, "128 random bits")
		require.False(t, seen[id])
		seen[id] = true
	}
}

func TestKeyDoesNotHoldTheTenant(t *testing.T) {
	t.Parallel()
	k := responsestore.Key{Tenant: "sk-secret-token-digest", Kind: "response", ID: "resp_1"}
	assert.NotContains(t, k.String(), "secret")
	assert.True(t, strings.HasPrefix(k.String(), "response:"))
	assert.NotEqual(t, k.String(), responsestore.Key{Tenant: "other", Kind: "response", ID: "resp_1"}.String())
}

func TestMemoryBoundsAndExpiry(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	evicted := 0
	m := responsestore.NewMemory(responsestore.MemoryOptions{
		MaxBytes: 10, MaxEntries: 3, Now: func() time.Time { return now }, Evicted: func(n int) { evicted += n },
	})
	ctx := context.Background()
	key := func(id string) responsestore.Key { return responsestore.Key{Kind: "response", ID: id} }
	require.NoError(t, m.Put(ctx, key("a"), []byte("aaa"), time.Minute))
	require.NoError(t, m.Put(ctx, key("b"), []byte("bbb"), time.Minute))
	require.NoError(t, m.Put(ctx, key("c"), []byte("ccc"), time.Minute))
	_, err := m.Get(ctx, key("a")) // a is now the most recently used
	require.NoError(t, err)
	require.NoError(t, m.Put(ctx, key("d"), []byte("dd"), time.Minute))
	_, err = m.Get(ctx, key("b"))
	assert.ErrorIs(t, err, responsestore.ErrNotFound, "past three entries the least recently used goes")
	assert.Equal(t, 1, evicted)
	bytes, n := m.Usage()
	assert.Equal(t, int64(8), bytes)
	assert.Equal(t, 3, n)

	require.NoError(t, m.Put(ctx, key("e"), []byte("eeeeeeeee"), time.Minute)) // 9 bytes: only it fits
	bytes, n = m.Usage()
	assert.Equal(t, int64(9), bytes)
	assert.Equal(t, 1, n)
	assert.Equal(t, 4, evicted)

	now = now.Add(time.Minute)
	_, err = m.Get(ctx, key("e"))
	assert.ErrorIs(t, err, responsestore.ErrNotFound, "expired at its ttl")
	_, n = m.Usage()
	assert.Equal(t, 0, n, "and dropped")
}

func TestRedisUnavailableAndBack(t *testing.T) {
	t.Parallel()
	rd := steptest.StartRedis(t)
	r, err := responsestore.NewRedis(responsestore.RedisOptions{URL: rd.URL, MaxBytes: 1 << 10, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	ctx := t.Context()
	k := responsestore.Key{Tenant: "t", Kind: "response", ID: responsestore.NewID("resp")}
	require.NoError(t, r.Put(ctx, k, []byte("v"), time.Minute))

	rd.Stop()
	_, err = r.Get(ctx, k)
	assert.ErrorIs(t, err, responsestore.ErrUnavailable)
	assert.ErrorIs(t, r.Put(ctx, k, []byte("v"), time.Minute), responsestore.ErrUnavailable)
	assert.ErrorIs(t, r.Ping(ctx), responsestore.ErrUnavailable)

	rd.Start() // no persistence in the test server: the value is gone, the store works again
	require.Eventually(t, func() bool { return r.Ping(ctx) == nil }, 30*time.Second, 50*time.Millisecond, "recovery without a restart of the client")
	_, err = r.Get(ctx, k)
	assert.ErrorIs(t, err, responsestore.ErrNotFound)
	require.NoError(t, r.Put(ctx, k, []byte("again"), time.Minute))
}

func TestRedisExpiry(t *testing.T) {
	t.Parallel()
	rd := steptest.StartRedis(t)
	r, err := responsestore.NewRedis(responsestore.RedisOptions{URL: rd.URL, MaxBytes: 1 << 10})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	k := responsestore.Key{Kind: "response", ID: "resp_x"}
	require.NoError(t, r.Put(t.Context(), k, []byte("v"), 100*time.Millisecond))
	require.Eventually(t, func() bool {
		_, err := r.Get(t.Context(), k)
		return err == responsestore.ErrNotFound
	}, 30*time.Second, 20*time.Millisecond, "Redis expires it at its ttl")
}

func TestUpdateAppendsConcurrently(t *testing.T) {
	t.Parallel()
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			key := responsestore.Key{Tenant: "alice", Kind: "conversation", ID: responsestore.NewID("conv")}
			require.NoError(t, s.Put(ctx, key, nil, time.Minute))
			require.NoError(t, s.Update(ctx, key, time.Minute, func(old []byte) ([]byte, error) {
				if old == nil {
					return nil, responsestore.ErrNotFound
				}
				return old, nil
			}), "an empty value is stored: old is not nil")
			const writers = 8
			errs := make(chan error, writers)
			for i := range writers {
				go func() {
					errs <- s.Update(ctx, key, time.Minute, func(old []byte) ([]byte, error) {
						return append(append([]byte(nil), old...), byte('a'+i)), nil
					})
				}()
			}
			for range writers {
				require.NoError(t, <-errs)
			}
			got, err := s.Get(ctx, key)
			require.NoError(t, err)
			assert.Len(t, got, writers, "every update landed: %q", got)
			for i := range writers {
				assert.Contains(t, string(got), string(rune('a'+i)))
			}
		})
	}
}

func TestUpdateFnErrorWritesNothing(t *testing.T) {
	t.Parallel()
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			key := responsestore.Key{Tenant: "alice", Kind: "conversation", ID: responsestore.NewID("conv")}
			err := s.Update(ctx, key, time.Minute, func(old []byte) ([]byte, error) {
				if old == nil {
					return nil, responsestore.ErrNotFound
				}
				return old, nil
			})
			require.ErrorIs(t, err, responsestore.ErrNotFound)
			_, err = s.Get(ctx, key)
			require.ErrorIs(t, err, responsestore.ErrNotFound, "nothing written")
			err = s.Update(ctx, key, time.Minute, func([]byte) ([]byte, error) { return make([]byte, 1<<20+1), nil })
			require.ErrorIs(t, err, responsestore.ErrTooLarge)
		})
	}
}
