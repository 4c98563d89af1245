package sim

import "sync"

// memoryShards spreads a memory over independent locks so concurrent requests
// rarely contend.
const memoryShards = 16

// memory is a bounded map: each shard keeps its most recently inserted keys
// and forgets the oldest when full (a ring, not an LRU). Safe for concurrent
// use.
type memory[K comparable, V any] struct {
	hash   func(K) uint64
	shards [memoryShards]memoryShard[K, V]
}

type memoryShard[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]memoryEntry[V]
	ring    []memorySlot[K]
	next    int // ring slot to overwrite once the ring is full
	seq     uint64
}

type memoryEntry[V any] struct {
	value V
	seq   uint64
}

// memorySlot names the insertion that owns a ring slot, so a key deleted and
// inserted again is not evicted by its stale slot.
type memorySlot[K comparable] struct {
	key K
	seq uint64
}

func newMemory[K comparable, V any](capacity int, hash func(K) uint64) *memory[K, V] {
	m := &memory[K, V]{hash: hash}
	perShard := max(1, (capacity+memoryShards-1)/memoryShards)
	for i := range m.shards {
		m.shards[i].entries = make(map[K]memoryEntry[V])
		m.shards[i].ring = make([]memorySlot[K], 0, perShard)
	}
	return m
}

func (m *memory[K, V]) shard(k K) *memoryShard[K, V] {
	return &m.shards[m.hash(k)%memoryShards]
}

// put inserts or refreshes k.
func (m *memory[K, V]) put(k K, v V) {
	sh := m.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.seq++
	slot := memorySlot[K]{key: k, seq: sh.seq}
	if len(sh.ring) < cap(sh.ring) {
		sh.ring = append(sh.ring, slot)
	} else {
		old := sh.ring[sh.next]
		if e, ok := sh.entries[old.key]; ok && e.seq == old.seq {
			delete(sh.entries, old.key)
		}
		sh.ring[sh.next] = slot
		sh.next = (sh.next + 1) % len(sh.ring)
	}
	sh.entries[k] = memoryEntry[V]{value: v, seq: sh.seq}
}

// get reports the value stored for k.
func (m *memory[K, V]) get(k K) (V, bool) {
	sh := m.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.entries[k]
	return e.value, ok
}

// remove forgets k.
func (m *memory[K, V]) remove(k K) {
	sh := m.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.entries, k)
}

// len counts the keys remembered.
func (m *memory[K, V]) len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}

func (m *memory[K, V]) reset() {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		clear(sh.entries)
		sh.ring = sh.ring[:0]
		sh.next = 0
		sh.mu.Unlock()
	}
}
