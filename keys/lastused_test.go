package keys

import (
	"strings"
	"testing"
	"time"
)

func TestTouchWritesLastUsed(t *testing.T) {
	ctx, clk, m, s := setup()
	k, secret := mustCreate(t, m, NewKey{Name: "used"})
	idle, _ := mustCreate(t, m, NewKey{Name: "idle"})

	// What storage holds: a Manager that never refreshed adds no use of
	// its own.
	reader := NewManager(s, "modelgate")
	lastUsed := func(id string) *int64 {
		t.Helper()
		got, err := reader.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}

	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if lastUsed(k.ID) != nil {
		t.Fatal("last_used_at set before any use")
	}
	stores := s.Stores()

	clk.Add(10 * time.Second)
	t1 := clk.Unix()
	m.Touch(k.ID)
	m.Touch("key_unknown")
	if lastUsed(k.ID) != nil {
		t.Fatal("Touch wrote storage")
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(k.ID); got == nil || *got != t1 {
		t.Fatalf("last_used_at = %v, want %d", got, t1)
	}
	if lastUsed(idle.ID) != nil {
		t.Fatal("last_used_at of an unused key written")
	}
	if got, _ := m.Lookup(Digest(secret)); got.LastUsedAt == nil || *got.LastUsedAt != t1 {
		t.Fatalf("index last_used_at = %v after Refresh", got.LastUsedAt)
	}
	if n := s.Stores() - stores; n != 1 {
		t.Fatalf("%d stores, want 1", n)
	}

	// Used again within the minute: not written until the minute is over.
	clk.Add(30 * time.Second)
	m.Touch(k.ID)
	t2 := clk.Unix()
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(k.ID); *got != t1 {
		t.Fatalf("last_used_at written again within a minute: %d", *got)
	}
	clk.Add(30 * time.Second)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(k.ID); *got != t2 {
		t.Fatalf("last_used_at = %d, want %d", *got, t2)
	}
	// Nothing new: nothing written.
	stores = s.Stores()
	clk.Add(5 * time.Minute)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Stores() - stores; n != 0 {
		t.Fatalf("%d stores without any use", n)
	}
	checkNoLocks(t, s)
}

// A key used on B and deleted on A is never written back by B.
func TestRefreshNeverResurrects(t *testing.T) {
	ctx, clk, a, s := setup()
	b := clk.set(NewManager(s, "modelgate"))
	k, secret := mustCreate(t, a, NewKey{Name: "doomed"})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	b.Touch(k.ID)
	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Exists(ctx, "modelgate/keys/"+k.ID+".json") {
		t.Fatal("B's Refresh recreated the deleted key")
	}
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Fatal("B still knows the deleted key")
	}
	for name := range s.Snapshot() {
		if strings.Contains(name, k.ID) {
			t.Errorf("storage still holds %s", name)
		}
	}
}

// TestListShowsUseBeforeItIsWritten: List and Get show the last use this
// process noted, though storage gets it at most once a minute.
func TestListShowsUseBeforeItIsWritten(t *testing.T) {
	ctx, clk, m, _ := setup()
	k, _ := mustCreate(t, m, NewKey{Name: "used"})
	m.Touch(k.ID)
	want := clk.Unix()
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].LastUsedAt == nil || *list[0].LastUsedAt != want {
		t.Fatalf("List = %+v, %v; want last_used_at %d", list, err, want)
	}
	got, err := m.Get(ctx, k.ID)
	if err != nil || got.LastUsedAt == nil || *got.LastUsedAt != want {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}
