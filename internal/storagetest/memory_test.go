package storagetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

func TestMemoryConformance(t *testing.T) {
	Conformance(t, func(*testing.T) certmagic.Storage { return NewMemory() })
}

// The checks themselves hold for Caddy's own storage, so Memory passing
// them means it behaves as that one.
// (About a second: that storage polls a held lock once a second.)
func TestFileStorageConformance(t *testing.T) {
	Conformance(t, func(t *testing.T) certmagic.Storage { return &certmagic.FileStorage{Path: t.TempDir()} })
}

func TestMemoryCleansKeys(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	if err := m.Store(ctx, "/a//b/", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Load(ctx, "a/b"); err != nil || string(got) != "v" {
		t.Errorf("Load(a/b) = %q, %v", got, err)
	}
	if got, err := m.List(ctx, "a/", false); err != nil || !slices.Equal(got, []string{"a/b"}) {
		t.Errorf("List(a/) = %v, %v", got, err)
	}
	if got, err := m.List(ctx, "", false); err != nil || !slices.Equal(got, []string{"a"}) {
		t.Errorf("List of the root = %v, %v", got, err)
	}
	if err := m.Store(ctx, "/", []byte("v")); err == nil {
		t.Error("a value was stored at the root")
	}
}

// Only one holder at a time, however many wait.
func TestMemoryLockExcludes(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	var (
		wg      sync.WaitGroup
		holders int // changed only under the lock "l": -race sees a broken lock
		most    int
	)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if err := m.Lock(ctx, "l"); err != nil {
					t.Error(err)
					return
				}
				holders++
				most = max(most, holders)
				holders--
				if err := m.Unlock(ctx, "l"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once", most)
	}
	if held := m.HeldLocks(); len(held) != 0 {
		t.Errorf("locks left held: %v", held)
	}
}

func TestMemoryFail(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	if err := m.Store(ctx, "a/b", []byte("v")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("storage down")
	m.Fail(boom)
	if err := m.Store(ctx, "a/c", nil); !errors.Is(err, boom) {
		t.Errorf("Store = %v", err)
	}
	if _, err := m.Load(ctx, "a/b"); !errors.Is(err, boom) {
		t.Errorf("Load = %v", err)
	}
	if err := m.Delete(ctx, "a/b"); !errors.Is(err, boom) {
		t.Errorf("Delete = %v", err)
	}
	if _, err := m.List(ctx, "a", true); !errors.Is(err, boom) {
		t.Errorf("List = %v", err)
	}
	if _, err := m.Stat(ctx, "a/b"); !errors.Is(err, boom) {
		t.Errorf("Stat = %v", err)
	}
	if m.Exists(ctx, "a/b") {
		t.Error("Exists is true on a failing storage")
	}
	if err := m.Lock(ctx, "l"); err != nil {
		t.Errorf("Lock = %v; locks do not fail", err)
	}
	if err := m.Unlock(ctx, "l"); err != nil {
		t.Errorf("Unlock = %v", err)
	}
	m.Fail(nil)
	if got, err := m.Load(ctx, "a/b"); err != nil || string(got) != "v" {
		t.Errorf("after recovery Load = %q, %v", got, err)
	}
	if n := m.Stores(); n != 1 {
		t.Errorf("Stores = %d, want the 1 that succeeded", n)
	}
}

func TestMemoryOnStore(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	refuse := errors.New("refused")
	var seen []string
	m.OnStore(func(key string, value []byte) error {
		seen = append(seen, key+"="+string(value))
		// The hook may use the storage.
		if m.Exists(ctx, "stop") {
			return refuse
		}
		return nil
	})
	if err := m.Store(ctx, "a//x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Store(ctx, "stop", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := m.Store(ctx, "b", []byte("3")); !errors.Is(err, refuse) {
		t.Errorf("Store the hook refused = %v", err)
	}
	if m.Exists(ctx, "b") {
		t.Error("a refused Store stored")
	}
	if !slices.Equal(seen, []string{"a/x=1", "stop=2", "b=3"}) {
		t.Errorf("the hook saw %v", seen)
	}
	m.OnStore(nil)
	if err := m.Store(ctx, "b", []byte("3")); err != nil {
		t.Errorf("Store without the hook = %v", err)
	}
	if n := m.Stores(); n != 3 {
		t.Errorf("Stores = %d, want 3", n)
	}
}

func TestMemoryInspect(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	for _, k := range []string{"a/b", "a/bc", "c"} {
		if err := m.Store(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Keys("a/b"); !slices.Equal(got, []string{"a/b", "a/bc"}) {
		t.Errorf("Keys(a/b) = %v", got)
	}
	if got := m.Keys(""); !slices.Equal(got, []string{"a/b", "a/bc", "c"}) {
		t.Errorf("Keys() = %v", got)
	}
	snap := m.Snapshot()
	snap["c"][0] = 'X'
	if got, _ := m.Load(ctx, "c"); string(got) != "c" {
		t.Error("changing a snapshot changed the storage")
	}
	if len(snap) != 3 || string(snap["a/bc"]) != "a/bc" {
		t.Errorf("Snapshot = %q", snap)
	}
	for _, l := range []string{"y", "x"} {
		if err := m.Lock(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.HeldLocks(); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("HeldLocks = %v", got)
	}
}

// A Lock waiting for a held lock gives up when its context ends, and takes
// nothing.
func TestMemoryLockCancelled(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	if err := m.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error)
	go func() { got <- m.Lock(cctx, "l") }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Lock = %v", err)
	}
	if err := m.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if held := m.HeldLocks(); len(held) != 0 {
		t.Errorf("a cancelled Lock left %v held", held)
	}
	if err := m.Lock(ctx, "l"); err != nil {
		t.Errorf("Lock after all that: %v", err)
	}
}
