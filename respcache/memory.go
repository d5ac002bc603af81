package respcache

import (
	"context"
	"sync"
	"time"
)

// Store keeps entries under keys for a time. Memory and Shared implement
// it.
type Store interface {
	// Get returns the entry of key, and false when it has none (or it
	// expired).
	Get(ctx context.Context, key Key) (Entry, bool, error)

	// Set stores e under key, replacing what it held, for ttl.
	Set(ctx context.Context, key Key, e Entry, ttl time.Duration) error
}

// Memory is a Store in this process: at most MaxEntries entries of at
// most MaxBytes together, the least recently used dropped first to make
// room, and every entry dropped once its ttl has passed. It is safe for
// concurrent use.
type Memory struct {
	now        func() time.Time
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	items map[Key]*node
	// lru runs from the most recently used (lru.next) to the least
	// (lru.prev); age from the newest (age.next) to the oldest (age.prev)
	// by expiry. Both are rings through a sentinel.
	lru, age node
	bytes    int64
	stats    MemoryStats
}

// node is one entry in a Memory, on both of its lists.
type node struct {
	key              Key
	entry            Entry
	expires          time.Time
	size             int64
	lruPrev, lruNext *node
	agePrev, ageNext *node
}

// MemoryStats counts what a Memory did since it was made.
type MemoryStats struct {
	Entries   int   // held now
	Bytes     int64 // held now
	Hits      int64
	Misses    int64
	Evictions int64 // dropped to make room
	Expired   int64 // dropped because their ttl passed
}

// NewMemory returns an empty Memory bounded as c says (its defaults for
// zero fields).
func NewMemory(c Config) *Memory { return newMemory(c, time.Now) }

func newMemory(c Config, now func() time.Time) *Memory {
	c = c.WithDefaults()
	m := &Memory{now: now, maxEntries: c.MaxEntries, maxBytes: c.MaxBytes, items: make(map[Key]*node)}
	m.lru.lruNext, m.lru.lruPrev = &m.lru, &m.lru
	m.age.ageNext, m.age.agePrev = &m.age, &m.age
	return m
}

var _ Store = (*Memory)(nil)

// Get implements Store: a hit becomes the most recently used entry.
func (m *Memory) Get(_ context.Context, key Key) (Entry, bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.items[key]
	if n == nil {
		m.stats.Misses++
		return Entry{}, false, nil
	}
	if !now.Before(n.expires) {
		m.remove(n)
		m.stats.Expired++
		m.stats.Misses++
		return Entry{}, false, nil
	}
	m.unlinkLRU(n)
	m.pushLRU(n)
	m.stats.Hits++
	return n.entry, true, nil
}

// Set implements Store. An entry larger than the whole Memory is not
// kept (Cache refuses it before).
func (m *Memory) Set(_ context.Context, key Key, e Entry, ttl time.Duration) error {
	now := m.now()
	n := &node{key: key, entry: e, expires: now.Add(ttl), size: e.size()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.items[key]; old != nil {
		m.remove(old)
	}
	m.expire(now)
	if n.size > m.maxBytes || ttl <= 0 {
		return nil
	}
	m.items[key] = n
	m.bytes += n.size
	m.pushLRU(n)
	m.pushAge(n)
	for len(m.items) > m.maxEntries || m.bytes > m.maxBytes {
		m.remove(m.lru.lruPrev)
		m.stats.Evictions++
	}
	return nil
}

// expire drops the entries whose ttl has passed, oldest first: those at
// the end of the age list. Entries of one Memory share a ttl as a rule
// (a configuration's), so the list is in order of expiry; an entry of a
// longer ttl before one of a shorter only delays the latter's drop, never
// serves it (Get checks every entry's own expiry).
func (m *Memory) expire(now time.Time) {
	for n := m.age.agePrev; n != &m.age && !now.Before(n.expires); n = m.age.agePrev {
		m.remove(n)
		m.stats.Expired++
	}
}

// remove drops n from the Memory.
func (m *Memory) remove(n *node) {
	delete(m.items, n.key)
	m.bytes -= n.size
	m.unlinkLRU(n)
	n.agePrev.ageNext, n.ageNext.agePrev = n.ageNext, n.agePrev
	n.agePrev, n.ageNext = nil, nil
}

func (m *Memory) pushLRU(n *node) {
	n.lruPrev, n.lruNext = &m.lru, m.lru.lruNext
	m.lru.lruNext.lruPrev = n
	m.lru.lruNext = n
}

func (m *Memory) unlinkLRU(n *node) {
	n.lruPrev.lruNext, n.lruNext.lruPrev = n.lruNext, n.lruPrev
	n.lruPrev, n.lruNext = nil, nil
}

func (m *Memory) pushAge(n *node) {
	n.agePrev, n.ageNext = &m.age, m.age.ageNext
	m.age.ageNext.agePrev = n
	m.age.ageNext = n
}

// Stats returns what m holds and has done.
func (m *Memory) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Entries, s.Bytes = len(m.items), m.bytes
	return s
}
