package responsestore

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// MemoryOptions bound a Memory store.
type MemoryOptions struct {
	// MaxBytes bounds the values' bytes together (> 0).
	MaxBytes int64
	// MaxEntries bounds their count (> 0).
	MaxEntries int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Evicted is called (under no lock) with how many entries a Put
	// evicted to make room, when it evicted any; nil: not told.
	Evicted func(n int)
}

// Memory is the in-process store: the values of one process, bounded by
// bytes and count, the least recently used evicted first to make room,
// each expiring at its ttl.
type Memory struct {
	o MemoryOptions

	mu      sync.Mutex
	entries map[string]*list.Element // key → element of lru
	lru     *list.List               // *entry, most recently used first
	bytes   int64
}

type entry struct {
	key     string
	value   []byte
	expires time.Time
}

// NewMemory is an empty Memory store.
func NewMemory(o MemoryOptions) *Memory {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Memory{o: o, entries: map[string]*list.Element{}, lru: list.New()}
}

// Put implements Store. A value larger than MaxBytes is ErrTooLarge.
func (m *Memory) Put(_ context.Context, key Key, value []byte, ttl time.Duration) error {
	if int64(len(value)) > m.o.MaxBytes {
		return ErrTooLarge
	}
	m.mu.Lock()
	evicted := m.put(key.String(), append([]byte(nil), value...), ttl)
	m.mu.Unlock()
	m.evicted(evicted)
	return nil
}

// Update implements Store: fn runs under the store's lock, once; the
// value it returns is kept as it is (fn must not change it afterwards).
func (m *Memory) Update(_ context.Context, key Key, ttl time.Duration, fn func(old []byte) ([]byte, error)) error {
	k := key.String()
	m.mu.Lock()
	var old []byte
	if el, ok := m.entries[k]; ok {
		if e := el.Value.(*entry); m.o.Now().Before(e.expires) {
			old = e.value
			if old == nil {
				old = []byte{} // stored, though empty
			}
		}
	}
	value, err := fn(old)
	if err == nil && int64(len(value)) > m.o.MaxBytes {
		err = ErrTooLarge
	}
	if err != nil {
		m.mu.Unlock()
		return err
	}
	evicted := m.put(k, value, ttl)
	m.mu.Unlock()
	m.evicted(evicted)
	return nil
}

// put stores value (owned) under k, evicting the least recently used to
// make room, and returns how many it evicted; the caller holds mu.
func (m *Memory) put(k string, value []byte, ttl time.Duration) int {
	if old, ok := m.entries[k]; ok {
		m.remove(old)
	}
	evicted := 0
	for m.lru.Len() > 0 && (m.bytes+int64(len(value)) > m.o.MaxBytes || m.lru.Len()+1 > m.o.MaxEntries) {
		m.remove(m.lru.Back())
		evicted++
	}
	m.entries[k] = m.lru.PushFront(&entry{key: k, value: value, expires: m.o.Now().Add(ttl)})
	m.bytes += int64(len(value))
	return evicted
}

// evicted tells MemoryOptions.Evicted of n evictions (under no lock).
func (m *Memory) evicted(n int) {
	if n > 0 && m.o.Evicted != nil {
		m.o.Evicted(n)
	}
}

// Get implements Store; it makes the value the most recently used.
func (m *Memory) Get(_ context.Context, key Key) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[key.String()]
	if !ok {
		return nil, ErrNotFound
	}
	e := el.Value.(*entry)
	if !m.o.Now().Before(e.expires) {
		m.remove(el)
		return nil, ErrNotFound
	}
	m.lru.MoveToFront(el)
	return e.value, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[key.String()]
	if !ok {
		return ErrNotFound
	}
	expired := !m.o.Now().Before(el.Value.(*entry).expires)
	m.remove(el)
	if expired {
		return ErrNotFound
	}
	return nil
}

// Usage is the bytes and count of the values held now.
func (m *Memory) Usage() (bytes int64, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes, m.lru.Len()
}

// remove drops el; the caller holds mu.
func (m *Memory) remove(el *list.Element) {
	e := m.lru.Remove(el).(*entry)
	delete(m.entries, e.key)
	m.bytes -= int64(len(e.value))
}
