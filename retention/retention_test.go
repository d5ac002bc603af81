package retention

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/state"
)

// thingKind is a Kind for the tests: objects at <dir>/things/<name>, whose
// value is "<expires, Unix ms, 0 for never> <padding>": an object's bytes
// are its value's length.
type thingKind struct {
	s       storage.Storage
	deleted atomic.Int64
	fail    string // the name Delete fails for
}

func (k *thingKind) Name() string { return "things" }

func (k *thingKind) Scan(ctx context.Context, dir string, f func(Object)) error {
	keys, err := k.s.List(ctx, path.Join(dir, "things"), false)
	if storage.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, key := range keys {
		b, err := k.s.Load(ctx, key)
		if storage.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		head, _, _ := strings.Cut(string(b), " ")
		ms, _ := strconv.ParseInt(head, 10, 64)
		o := Object{Name: path.Base(key), Bytes: int64(len(b))}
		if ms > 0 {
			o.Expires = time.UnixMilli(ms)
		}
		f(o)
	}
	return nil
}

func (k *thingKind) Delete(ctx context.Context, dir string, o Object) error {
	if o.Name == k.fail {
		return errors.New("the disk said no")
	}
	k.deleted.Add(1)
	return k.s.Delete(ctx, path.Join(dir, "things", o.Name))
}

// putThing stores a thing of bytes bytes expiring at expires (zero: never)
// for owner.
func putThing(t *testing.T, s storage.Storage, owner, name string, expires time.Time, bytes int) {
	t.Helper()
	ms := int64(0)
	if !expires.IsZero() {
		ms = expires.UnixMilli()
	}
	v := strconv.FormatInt(ms, 10) + " "
	v += strings.Repeat("x", bytes-len(v))
	if err := s.Store(context.Background(), path.Join(storage.OwnerDir("mg", owner), "things", name), []byte(v)); err != nil {
		t.Fatal(err)
	}
}

// clock is a fake clock the tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_800_000_000_000)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) at(d time.Duration) time.Time { return c.now().Add(d) }

func names(t *testing.T, s *storagetest.Memory, owner string) string {
	t.Helper()
	var out []string
	for _, k := range s.Keys(path.Join(storage.OwnerDir("mg", owner), "things") + "/") {
		out = append(out, path.Base(k))
	}
	return strings.Join(out, " ")
}

// A sweep deletes what expired by the clock and keeps the rest; it gives
// the freed bytes back to the owner's count; a sweep less than Interval
// after the last one does nothing.
func TestSweepDeletesExpired(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := newClock()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a-1h", clk.at(time.Hour), 100)
	putThing(t, mem, "alice", "a-2h", clk.at(2*time.Hour), 200)
	putThing(t, mem, "alice", "a-never", time.Time{}, 300)
	putThing(t, mem, "bob", "b-1h", clk.at(time.Hour), 400)
	ledger := NewLedger(state.NewLocal(), time.Hour, kind)
	alice, bob := storage.OwnerDir("mg", "alice"), storage.OwnerDir("mg", "bob")
	if used, err := ledger.Used(ctx, alice); err != nil || used != 600 {
		t.Fatalf("alice's count before: %d %v", used, err)
	}
	sw := &Sweeper{Storage: mem, Prefix: "mg", Kinds: []Kind{kind}, Ledger: ledger, Interval: time.Hour, Now: clk.now}

	res, err := sw.Sweep(ctx)
	if err != nil || !res.Swept || res.Owners != 2 || len(res.Deleted) != 0 {
		t.Fatalf("a sweep before anything expired: %+v %v", res, err)
	}

	clk.advance(time.Hour - time.Millisecond) // the first sweep was just now
	if res, err := sw.Sweep(ctx); err != nil || res.Swept {
		t.Fatalf("a sweep an hour less a moment after the last: %+v %v", res, err)
	}
	clk.advance(time.Millisecond)
	res, err = sw.Sweep(ctx)
	if err != nil || !res.Swept || res.Deleted["things"] != 2 || res.Bytes != 500 || res.Failed != 0 {
		t.Fatalf("a sweep after an hour: %+v %v", res, err)
	}
	if got := names(t, mem, "alice"); got != "a-2h a-never" {
		t.Errorf("alice keeps %q", got)
	}
	if got := names(t, mem, "bob"); got != "" {
		t.Errorf("bob keeps %q", got)
	}
	if used, err := ledger.Used(ctx, alice); err != nil || used != 500 {
		t.Errorf("alice's count after: %d %v, want 500", used, err)
	}
	// Bob was never counted: his count is seeded from what is left.
	if used, err := ledger.Used(ctx, bob); err != nil || used != 0 {
		t.Errorf("bob's count after: %d %v, want 0", used, err)
	}

	clk.advance(2 * time.Hour)
	if res, err := sw.Sweep(ctx); err != nil || res.Deleted["things"] != 1 || names(t, mem, "alice") != "a-never" {
		t.Fatalf("a sweep after two more hours: %+v %v, left %q", res, err, names(t, mem, "alice"))
	}
	if n := kind.deleted.Load(); n != 3 {
		t.Errorf("%d deletions, want 3", n)
	}
}

// Instances sharing a storage sweep one at a time and once per interval:
// each expired object is deleted, and its bytes given back, once.
func TestSweepOnceAcrossInstances(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := newClock()
	kind := &thingKind{s: mem}
	for i := range 50 {
		putThing(t, mem, fmt.Sprintf("owner-%d", i%5), fmt.Sprintf("t-%02d", i), clk.at(time.Minute), 20)
	}
	putThing(t, mem, "owner-0", "keep", time.Time{}, 20)
	ledger := NewLedger(state.NewLocal(), time.Hour, kind) // the instances share the state
	owner0 := storage.OwnerDir("mg", "owner-0")
	if used, err := ledger.Used(ctx, owner0); err != nil || used != 220 {
		t.Fatalf("owner-0's count: %d %v", used, err)
	}
	clk.advance(time.Minute)

	var swept atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := &Sweeper{Storage: mem, Prefix: "mg", Kinds: []Kind{kind}, Ledger: ledger, Interval: time.Hour, Now: clk.now}
			res, err := sw.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			if res.Swept {
				swept.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := swept.Load(); n != 1 {
		t.Errorf("%d instances swept, want 1", n)
	}
	if n := kind.deleted.Load(); n != 50 {
		t.Errorf("%d deletions of 50 expired objects", n)
	}
	if used, err := ledger.Used(ctx, owner0); err != nil || used != 20 {
		t.Errorf("owner-0's count after: %d %v, want 20", used, err)
	}
	if held := mem.HeldLocks(); len(held) != 0 {
		t.Errorf("locks left held: %v", held)
	}
}

// A sweep waits for another instance's sweep and then does nothing; an
// instance whose lock is held longer gives up without sweeping.
func TestSweepWhileAnotherSweeps(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := newClock()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a", clk.at(-time.Second), 20)
	unlock, err := storage.Lock(ctx, mem, LockName)
	if err != nil {
		t.Fatal(err)
	}
	sw := &Sweeper{Storage: mem, Prefix: "mg", Kinds: []Kind{kind}, Interval: time.Hour, Now: clk.now}
	short, cancel := context.WithCancel(ctx)
	done := make(chan Result)
	go func() {
		res, _ := sw.Sweep(short)
		done <- res
	}()
	cancel() // the caller gives up while the lock is held
	if res := <-done; res.Swept || kind.deleted.Load() != 0 {
		t.Errorf("a sweep that never had the lock: %+v", res)
	}
	unlock()
	if res, err := sw.Sweep(ctx); err != nil || !res.Swept || kind.deleted.Load() != 1 {
		t.Errorf("a sweep once the lock is free: %+v %v", res, err)
	}
}

// An object that cannot be deleted is left for the next sweep, and its
// bytes stay counted; the others go.
func TestSweepDeletionFails(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := newClock()
	kind := &thingKind{s: mem, fail: "stuck"}
	putThing(t, mem, "alice", "gone", clk.at(-time.Second), 100)
	putThing(t, mem, "alice", "stuck", clk.at(-time.Second), 200)
	ledger := NewLedger(state.NewLocal(), time.Hour, kind)
	alice := storage.OwnerDir("mg", "alice")
	if _, err := ledger.Used(ctx, alice); err != nil {
		t.Fatal(err)
	}
	sw := &Sweeper{Storage: mem, Prefix: "mg", Kinds: []Kind{kind}, Ledger: ledger, Interval: time.Hour, Now: clk.now}
	res, err := sw.Sweep(ctx)
	if err != nil || res.Deleted["things"] != 1 || res.Failed != 1 || res.Bytes != 100 {
		t.Fatalf("%+v %v", res, err)
	}
	if used, _ := ledger.Used(ctx, alice); used != 200 {
		t.Errorf("alice's count %d, want 200", used)
	}
	kind.fail = ""
	clk.advance(time.Hour)
	if res, err := sw.Sweep(ctx); err != nil || res.Deleted["things"] != 1 || names(t, mem, "alice") != "" {
		t.Errorf("the next sweep: %+v %v", res, err)
	}
}

// A storage that cannot be listed fails the sweep, which records nothing:
// the next tick tries again.
func TestSweepStorageDown(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := newClock()
	kind := &thingKind{s: mem}
	putThing(t, mem, "alice", "a", clk.at(-time.Second), 20)
	sw := &Sweeper{Storage: mem, Prefix: "mg", Kinds: []Kind{kind}, Interval: time.Hour, Now: clk.now}
	mem.Fail(errors.New("storage down"))
	if _, err := sw.Sweep(ctx); err == nil {
		t.Fatal("a sweep of a storage that is down succeeded")
	}
	mem.Fail(nil)
	if res, err := sw.Sweep(ctx); err != nil || !res.Swept || kind.deleted.Load() != 1 {
		t.Errorf("the sweep after: %+v %v", res, err)
	}
}
