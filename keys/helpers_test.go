package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
)

// clock is a settable time, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := new(clock)
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration)     { c.ns.Add(int64(d)) }
func (c *clock) Unix() int64             { return c.Now().Unix() }
func (c *clock) set(m *Manager) *Manager { m.Now = c.Now; return m }

func ptr(v int64) *int64 { return &v }

func mustCreate(t testing.TB, m *Manager, nk NewKey) (Key, string) {
	t.Helper()
	k, secret, err := m.Create(context.Background(), nk)
	if err != nil {
		t.Fatalf("Create(%+v): %v", nk, err)
	}
	return k, secret
}

// sameKey compares keys by their JSON.
func sameKey(a, b Key) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// populate stores n keys directly and loads them with one Refresh.
func populate(tb testing.TB, m *Manager, n int) [][32]byte {
	tb.Helper()
	digests := storeRecords(tb, m, n)
	if err := m.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
	if got := len(m.idx.Load().byID); got != n {
		tb.Fatalf("%d keys loaded, want %d", got, n)
	}
	return digests
}

// storeRecords stores the records of n keys and nothing else, as an
// earlier version stored keys (without a digest index record), and
// returns their digests.
func storeRecords(tb testing.TB, m *Manager, n int) [][32]byte {
	tb.Helper()
	ctx := context.Background()
	digests := make([][32]byte, n)
	now := time.Now()
	for i := range digests {
		secret, err := Generate()
		if err != nil {
			tb.Fatal(err)
		}
		digests[i] = Digest(secret)
		k := Key{ID: newID(now), Name: fmt.Sprint("k", i), Owner: "o", Hint: Hint(secret), CreatedAt: now.Unix()}
		if err := m.store(ctx, k, digests[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return digests
}

// newManager returns a Manager of keys under "modelgate" in a fresh
// in-memory storage, on the clock clk (nil: the real one), and the storage.
// setup is the start of most tests: a context, a clock and a manager on a
// fresh storage, on that clock.
func setup() (context.Context, *clock, *Manager, *storagetest.Memory) {
	clk := newClock()
	m, s := newManager(clk)
	return context.Background(), clk, m, s
}

func newManager(clk *clock) (*Manager, *storagetest.Memory) {
	s := storagetest.NewMemory()
	m := NewManager(s, "modelgate")
	if clk != nil {
		clk.set(m)
	}
	return m, s
}

// checkNoLocks checks no storage lock is left held.
func checkNoLocks(t *testing.T, s *storagetest.Memory) {
	t.Helper()
	if locks := s.HeldLocks(); len(locks) != 0 {
		t.Errorf("locks left held: %v", locks)
	}
}

// countingStorage counts the reads of a storage: a lookup must read the
// records it needs, never every key.
type countingStorage struct {
	Storage
	loads, lists atomic.Int64
}

func (c *countingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	c.loads.Add(1)
	return c.Storage.Load(ctx, key)
}

func (c *countingStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	c.lists.Add(1)
	return c.Storage.List(ctx, dir, recursive)
}

// reads returns the loads and lists since the last call, and starts the
// count again.
func (c *countingStorage) reads() (loads, lists int64) {
	return c.loads.Swap(0), c.lists.Swap(0)
}
