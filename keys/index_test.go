package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestExpiry(t *testing.T) {
	ctx, clk, m, _ := setup()
	k, secret := mustCreate(t, m, NewKey{Name: "short", ExpiresAt: ptr(clk.Unix() + 60)})
	if _, ok := m.Lookup(Digest(secret)); !ok {
		t.Fatal("unexpired key not found")
	}
	clk.Add(59 * time.Second)
	if _, ok := m.Lookup(Digest(secret)); !ok {
		t.Fatal("key not found a second before it expires")
	}
	clk.Add(time.Second)
	if got, ok := m.Lookup(Digest(secret)); ok {
		t.Fatalf("Lookup at expires_at = %+v, true", got)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup(Digest(secret)); ok {
		t.Fatal("expired key found after Refresh")
	}
	// It is still listed, and leak reports still find it.
	if got, err := m.Get(ctx, k.ID); err != nil || got.ID != k.ID {
		t.Fatalf("Get(expired) = %+v, %v", got, err)
	}
	got, found, err := m.FindByDigest(ctx, Digest(secret))
	if err != nil || !found || got.ID != k.ID {
		t.Fatalf("FindByDigest(expired) = %+v, %v, %v", got, found, err)
	}
}

func TestTwoManagers(t *testing.T) {
	ctx, clk, a, s := setup()
	b := clk.set(NewManager(s, "modelgate"))

	k, secret := mustCreate(t, a, NewKey{Name: "shared"})
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Fatal("B knows A's key before its Refresh")
	}
	// FindByDigest reads storage, so B finds it all the same.
	if got, found, err := b.FindByDigest(ctx, Digest(secret)); err != nil || !found || got.ID != k.ID {
		t.Fatalf("B.FindByDigest = %+v, %v, %v", got, found, err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Lookup(Digest(secret)); !ok || got.ID != k.ID {
		t.Fatalf("B.Lookup after Refresh = %+v, %v", got, ok)
	}

	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Lookup(Digest(secret)); ok {
		t.Fatal("A still knows the key it deleted")
	}
	if _, ok := b.Lookup(Digest(secret)); !ok {
		t.Fatal("B forgot the key before its Refresh")
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Fatal("B still knows the key after Refresh")
	}
	if got, found, err := b.FindByDigest(ctx, Digest(secret)); err != nil || found {
		t.Fatalf("FindByDigest(deleted) = %+v, %v, %v", got, found, err)
	}
	// A delete of a key another instance already deleted is ErrNotFound,
	// and removes it from this index too.
	k2, secret2 := mustCreate(t, a, NewKey{Name: "other"})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, k2.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("B.Delete(already deleted) = %v", err)
	}
	if _, ok := b.Lookup(Digest(secret2)); ok {
		t.Fatal("B still knows a key whose Delete said ErrNotFound")
	}
}

func TestRefreshKeepsIndexOnError(t *testing.T) {
	ctx := context.Background()
	m, s := newManager(nil)
	_, secret := mustCreate(t, m, NewKey{Name: "n"})
	boom := errors.New("storage down")
	s.Fail(boom)
	if err := m.Refresh(ctx); !errors.Is(err, boom) {
		t.Fatalf("Refresh = %v, want the storage's error", err)
	}
	if _, ok := m.Lookup(Digest(secret)); !ok {
		t.Fatal("a failed Refresh emptied the index")
	}
	if _, err := m.List(ctx); !errors.Is(err, boom) {
		t.Fatalf("List = %v", err)
	}
	if _, _, err := m.Create(ctx, NewKey{Name: "m"}); !errors.Is(err, boom) {
		t.Fatalf("Create = %v", err)
	}
	if n := len(m.idx.Load().byID); n != 1 {
		t.Fatalf("a failed Create left %d keys in the index", n)
	}
	// A storage that cannot say whether the record is there is not a
	// missing key: Delete reports the failure and the key keeps working
	// (a 404 would tell the operator it is gone while it is not).
	id := m.idx.Load().byDigest[Digest(secret)].key.ID
	if err := m.Delete(ctx, id); !errors.Is(err, boom) {
		t.Fatalf("Delete = %v, want the storage's error", err)
	}
	if _, ok := m.Lookup(Digest(secret)); !ok {
		t.Fatal("a failed Delete dropped the key from the index")
	}
	s.Fail(nil)
	if _, err := m.Get(ctx, id); err != nil {
		t.Fatalf("the key's record after a failed Delete: %v", err)
	}
}

// A copied record (two keys with one digest) makes neither work.
func TestDuplicateDigest(t *testing.T) {
	ctx := context.Background()
	m, s := newManager(nil)
	k, secret := mustCreate(t, m, NewKey{Name: "one"})
	v, _ := s.Load(ctx, "modelgate/keys/"+k.ID+".json")
	id2 := newID(time.Now())
	v = bytes.Replace(v, []byte(k.ID), []byte(id2), 1)
	v = bytes.Replace(v, []byte(`"owner":"one"`), []byte(`"owner":"mallory"`), 1)
	if err := s.Store(ctx, "modelgate/keys/"+id2+".json", v); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); err == nil {
		t.Fatal("Refresh did not report the duplicate")
	}
	if got, ok := m.Lookup(Digest(secret)); ok {
		t.Fatalf("Lookup = %+v for a digest two records claim", got)
	}
}

// Creates and deletes racing with Refreshes are never undone by them.
func TestConcurrentRefresh(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, s := newManager(nil)
	other := NewManager(s, "modelgate")

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // another instance's creates arrive by Refresh only
		defer wg.Done()
		for ctx.Err() == nil {
			if _, _, err := other.Create(ctx, NewKey{Name: "other"}); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
	}()

	type made struct {
		id, secret string
	}
	var kept []made
	for i := 0; i < 200; i++ {
		k, secret := mustCreate(t, m, NewKey{Name: fmt.Sprint("k", i)})
		if _, ok := m.Lookup(Digest(secret)); !ok {
			t.Fatalf("key %d unknown right after Create", i)
		}
		m.Touch(k.ID)
		if i%2 == 0 {
			if err := m.Delete(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
			if _, ok := m.Lookup(Digest(secret)); ok {
				t.Fatalf("key %d known right after Delete", i)
			}
			kept = append(kept, made{id: "", secret: secret})
		} else {
			kept = append(kept, made{id: k.ID, secret: secret})
		}
	}
	cancel()
	wg.Wait()
	for i, k := range kept {
		_, ok := m.Lookup(Digest(k.secret))
		if ok != (k.id != "") {
			t.Errorf("key %d: Lookup = %v after the race, deleted = %v", i, ok, k.id == "")
		}
	}
	// And a last Refresh agrees with storage.
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.idx.Load().byID); got != len(list) {
		t.Errorf("index has %d keys, storage %d", got, len(list))
	}
}

func TestLookupAndTouchAllocs(t *testing.T) {
	m, _ := newManager(nil)
	k, secret := mustCreate(t, m, NewKey{Name: "n", Models: []string{"a"}, ExpiresAt: ptr(time.Now().Unix() + 3600)})
	d := Digest(secret)
	var ok bool
	if n := testing.AllocsPerRun(1000, func() { _, ok = m.Lookup(d) }); n != 0 || !ok {
		t.Errorf("Lookup: %v allocations, found %v", n, ok)
	}
	if n := testing.AllocsPerRun(1000, func() { m.Touch(k.ID) }); n != 0 {
		t.Errorf("Touch: %v allocations", n)
	}
}

func BenchmarkLookup(b *testing.B) {
	m, _ := newManager(nil)
	digests := populate(b, m, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, ok := m.Lookup(digests[i%len(digests)]); !ok {
			b.Fatal("not found")
		}
		i++
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	m, _ := newManager(nil)
	digests := populate(b, m, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k, ok := m.Lookup(digests[i%len(digests)])
			if !ok {
				b.Fatal("not found")
			}
			m.Touch(k.ID)
			i++
		}
	})
}

// TestReloadAndChanged: a manager tells Changed of its creates, deletes and
// first exposure marks; another manager on the storage Reloads one key at
// once — added, updated, removed — without a full Refresh.
func TestReloadAndChanged(t *testing.T) {
	ctx, clk, a, s := setup()
	b := clk.set(NewManager(s, "modelgate"))
	var told []string
	a.Changed = func(id string) { told = append(told, id) }

	k, secret, err := a.Create(ctx, NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Fatal("b knew the key before any reload")
	}
	if err := b.Reload(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Lookup(Digest(secret)); !ok || got.Name != "ci" {
		t.Fatalf("after Reload: %+v %v", got, ok)
	}
	if _, first, err := a.MarkExposed(ctx, k.ID, Exposure{Reporter: "github"}); err != nil || !first {
		t.Fatal(err)
	}
	if _, _, err := a.MarkExposed(ctx, k.ID, Exposure{Reporter: "github"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Lookup(Digest(secret)); got.ExposedAt == nil {
		t.Error("the exposure did not reach b")
	}
	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Error("a deleted key still works on b after Reload")
	}
	if want := []string{k.ID, k.ID, k.ID}; len(told) != 3 || told[0] != want[0] || told[2] != want[2] {
		t.Errorf("Changed was told %v, want create, first exposure and delete of %s", told, k.ID)
	}
	if err := b.Reload(ctx, "not an id"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a malformed id: %v", err)
	}
}
