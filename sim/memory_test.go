package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemoryForgetsOldestPerShard(t *testing.T) {
	t.Parallel()
	// All keys in one shard, two slots.
	m := newMemory[int, string](2*memoryShards, func(int) uint64 { return 0 })
	m.put(1, "a")
	m.put(2, "b")
	m.put(3, "c")
	_, ok := m.get(1)
	assert.False(t, ok, "the oldest key is forgotten")
	v, ok := m.get(3)
	assert.True(t, ok)
	assert.Equal(t, "c", v)
	assert.Equal(t, 2, m.len())
}

func TestMemoryReinsertedKeySurvivesItsStaleSlot(t *testing.T) {
	t.Parallel()
	m := newMemory[int, string](2*memoryShards, func(int) uint64 { return 0 })
	m.put(1, "a")
	m.remove(1)
	m.put(2, "b")
	m.put(1, "again") // evicts the stale slot of the first 1
	v, ok := m.get(1)
	assert.True(t, ok, "the stale slot does not evict the new entry")
	assert.Equal(t, "again", v)
	_, ok = m.get(2)
	assert.True(t, ok)
}

func TestMemoryBoundedOverall(t *testing.T) {
	t.Parallel()
	m := newMemory[uint64, struct{}](memoryCapacity, func(k uint64) uint64 { return k })
	for i := range uint64(3 * memoryCapacity) {
		m.put(i, struct{}{})
	}
	assert.LessOrEqual(t, m.len(), memoryCapacity+memoryShards)
	assert.GreaterOrEqual(t, m.len(), memoryCapacity)
	m.reset()
	assert.Zero(t, m.len())
}
