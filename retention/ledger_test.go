package retention

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/state"
)

// An owner's count is seeded from the storage the first time it is asked
// for, then follows what is added; an owner not counted yet is left
// alone by Add, and seeded with the change already in the storage.
func TestLedgerSeedsFromStorage(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a", time.Time{}, 100)
	putThing(t, mem, "alice", "b", time.Time{}, 50)
	alice, bob := storage.OwnerDir("mg", "alice"), storage.OwnerDir("mg", "bob")
	l := NewLedger(state.NewLocal(), time.Hour, kind)

	if err := l.Add(ctx, bob, 70); err != nil {
		t.Fatal(err)
	}
	putThing(t, mem, "bob", "c", time.Time{}, 70) // the write Add was told of
	if used, err := l.Used(ctx, bob); err != nil || used != 70 {
		t.Errorf("bob: %d %v, want 70 (seeded, not counted twice)", used, err)
	}
	if used, err := l.Used(ctx, alice); err != nil || used != 150 {
		t.Fatalf("alice: %d %v, want 150", used, err)
	}
	if err := l.Add(ctx, alice, 25); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(ctx, alice, -100); err != nil {
		t.Fatal(err)
	}
	if used, _ := l.Used(ctx, alice); used != 75 {
		t.Errorf("alice after +25 and -100: %d, want 75", used)
	}
	// Another instance's ledger on the same state reads the same count.
	if used, _ := NewLedger(l.st, time.Hour, kind).Used(ctx, alice); used != 75 {
		t.Errorf("alice by another instance: %d, want 75", used)
	}
}

// Reserve counts what fits within the limit, refuses what does not
// (counting nothing), and seeds a missing count first.
func TestLedgerReserve(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a", time.Time{}, 600)
	alice := storage.OwnerDir("mg", "alice")
	l := NewLedger(state.NewLocal(), time.Hour, kind)
	for _, tc := range []struct {
		n        int64
		used     int64
		admitted bool
	}{
		{300, 900, true},
		{101, 900, false},
		{100, 1000, true},
		{1, 1000, false},
		{0, 1000, true},
	} {
		used, ok, err := l.Reserve(ctx, alice, tc.n, 1000)
		if err != nil || ok != tc.admitted || used != tc.used {
			t.Errorf("Reserve(%d) = %d, %v, %v; want %d, %v", tc.n, used, ok, err, tc.used, tc.admitted)
		}
	}
}

// Concurrent reservations never pass the limit together, across the
// instances that share the state.
func TestLedgerReserveConcurrent(t *testing.T) {
	ctx := context.Background()
	kind := &thingKind{s: storagetest.NewMemory()}
	st := state.NewLocal()
	dir := storage.OwnerDir("mg", "alice")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := NewLedger(st, time.Hour, kind) // an instance each
			if _, ok, err := l.Reserve(ctx, dir, int64(10+i%7), 1000); err != nil {
				t.Error(err)
			} else if ok {
				admitted.Add(int64(10 + i%7))
			}
		}()
	}
	wg.Wait()
	used, err := NewLedger(st, time.Hour, kind).Used(ctx, dir)
	if err != nil || used != admitted.Load() || used > 1000 || used < 1000-16 {
		t.Errorf("counted %d (%v), admitted %d, limit 1000", used, err, admitted.Load())
	}
}

// A storage that cannot be read leaves the count missing and says so; it
// is seeded once the storage is back.
func TestLedgerStorageDown(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a", time.Time{}, 100)
	alice := storage.OwnerDir("mg", "alice")
	l := NewLedger(state.NewLocal(), time.Hour, kind)
	down := errors.New("storage down")
	mem.Fail(down)
	if _, err := l.Used(ctx, alice); !errors.Is(err, down) {
		t.Fatalf("Used with the storage down: %v", err)
	}
	if _, _, err := l.Reserve(ctx, alice, 1, 1000); !errors.Is(err, down) {
		t.Fatalf("Reserve with the storage down: %v", err)
	}
	mem.Fail(nil)
	if used, err := l.Used(ctx, alice); err != nil || used != 100 {
		t.Errorf("after: %d %v", used, err)
	}
}
