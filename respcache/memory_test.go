package respcache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a fake clock for tests: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_750_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func keyN(i int) Key {
	var k Key
	copy(k[:], fmt.Sprintf("key %d", i))
	return k
}

func entryOf(body string) Entry { return Entry{Body: []byte(body), Provider: "p", Model: "m"} }

func has(t *testing.T, s Store, k Key) bool {
	t.Helper()
	_, ok, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func set(t *testing.T, s Store, k Key, e Entry, ttl time.Duration) {
	t.Helper()
	if err := s.Set(context.Background(), k, e, ttl); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryTTL(t *testing.T) {
	clk := newClock()
	m := newMemory(Config{}, clk.now)
	set(t, m, keyN(1), entryOf("one"), time.Minute)
	clk.advance(59 * time.Second)
	e, ok, _ := m.Get(context.Background(), keyN(1))
	if !ok || string(e.Body) != "one" {
		t.Fatalf("before its ttl: %q, %v", e.Body, ok)
	}
	clk.advance(time.Second)
	if has(t, m, keyN(1)) {
		t.Fatal("an entry is served at its ttl")
	}
	if s := m.Stats(); s.Entries != 0 || s.Bytes != 0 || s.Expired != 1 || s.Hits != 1 || s.Misses != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// Expired entries are dropped when later ones are stored, without being
// looked up again: memory holds what is live.
func TestMemoryDropsExpired(t *testing.T) {
	clk := newClock()
	m := newMemory(Config{}, clk.now)
	for i := range 100 {
		set(t, m, keyN(i), entryOf("x"), time.Minute)
		clk.advance(time.Second)
	}
	// Now the first 40 have expired (stored 100s to 61s ago).
	clk.advance(0)
	set(t, m, keyN(1000), entryOf("y"), time.Minute)
	if s := m.Stats(); s.Entries != 60 || s.Expired != 41 {
		t.Fatalf("after storing past 41 expiries: %+v, want 60 entries, 41 expired", s)
	}
}

func TestMemoryLRU(t *testing.T) {
	clk := newClock()
	m := newMemory(Config{MaxEntries: 3}, clk.now)
	for i := 1; i <= 3; i++ {
		set(t, m, keyN(i), entryOf("x"), time.Hour)
	}
	// Use 1: 2 is now the least recently used.
	if !has(t, m, keyN(1)) {
		t.Fatal("1 missing")
	}
	set(t, m, keyN(4), entryOf("x"), time.Hour)
	if has(t, m, keyN(2)) {
		t.Fatal("the least recently used entry was kept")
	}
	for _, i := range []int{1, 3, 4} {
		if !has(t, m, keyN(i)) {
			t.Fatalf("%d was evicted", i)
		}
	}
	if s := m.Stats(); s.Entries != 3 || s.Evictions != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestMemoryBytes(t *testing.T) {
	clk := newClock()
	body := strings.Repeat("x", 1000)
	per := entryOf(body)
	size := per.size()
	m := newMemory(Config{MaxBytes: 3*size + size/2, MaxEntrySize: 2 * size}, clk.now)
	for i := 1; i <= 3; i++ {
		set(t, m, keyN(i), entryOf(body), time.Hour)
	}
	if s := m.Stats(); s.Entries != 3 || s.Bytes != 3*size {
		t.Fatalf("stats = %+v, want 3 entries of %d bytes", s, size)
	}
	set(t, m, keyN(4), entryOf(body), time.Hour)
	if has(t, m, keyN(1)) || !has(t, m, keyN(4)) {
		t.Fatal("the byte bound did not evict the oldest")
	}
	// A big entry takes the room of two.
	big := entryOf(strings.Repeat("y", 2000))
	set(t, m, keyN(5), big, time.Hour)
	if s := m.Stats(); s.Bytes > 3*size+size/2 || s.Entries != 2 {
		t.Fatalf("stats after a double entry = %+v", s)
	}
	// An entry larger than the whole memory is not kept, and evicts
	// nothing.
	set(t, m, keyN(6), entryOf(strings.Repeat("z", 5000)), time.Hour)
	if has(t, m, keyN(6)) || !has(t, m, keyN(5)) {
		t.Fatal("an entry larger than max_size was stored")
	}
}

func TestMemoryReplace(t *testing.T) {
	clk := newClock()
	m := newMemory(Config{}, clk.now)
	set(t, m, keyN(1), entryOf("old answer"), time.Minute)
	clk.advance(50 * time.Second)
	set(t, m, keyN(1), entryOf("new"), time.Minute)
	clk.advance(50 * time.Second)
	e, ok, _ := m.Get(context.Background(), keyN(1))
	if !ok || string(e.Body) != "new" {
		t.Fatalf("after a replace: %q, %v", e.Body, ok)
	}
	newSize := entryOf("new").size()
	if s := m.Stats(); s.Entries != 1 || s.Bytes != newSize {
		t.Fatalf("stats = %+v", s)
	}
}

// Many goroutines storing and looking up at once keep the bounds and
// never read a torn entry (run with -race).
func TestMemoryConcurrent(t *testing.T) {
	m := NewMemory(Config{MaxEntries: 64})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := keyN((g*7 + i) % 200)
				want := fmt.Sprintf("body of %x", k[:8])
				if i%3 == 0 {
					_ = m.Set(ctx, k, entryOf(want), time.Hour)
					continue
				}
				if e, ok, _ := m.Get(ctx, k); ok && string(e.Body) != want {
					t.Errorf("%x: read %q", k[:8], e.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	s := m.Stats()
	if s.Entries > 64 || s.Entries == 0 {
		t.Fatalf("stats = %+v, want at most 64 entries", s)
	}
	var want int64
	for k, n := range m.items {
		if n.key != k {
			t.Fatal("an item is under another key")
		}
		want += n.size
	}
	if want != s.Bytes {
		t.Fatalf("bytes counted %d, held %d", s.Bytes, want)
	}
	// The lists hold exactly the items.
	count := 0
	for n := m.lru.lruNext; n != &m.lru; n = n.lruNext {
		count++
	}
	ages := 0
	for n := m.age.ageNext; n != &m.age; n = n.ageNext {
		ages++
	}
	if count != len(m.items) || ages != len(m.items) {
		t.Fatalf("lists of %d and %d nodes for %d items", count, ages, len(m.items))
	}
}
