package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
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

func TestCreateListGetDelete(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	m := clk.set(NewManager(s, "modelgate"))

	k1, secret1 := mustCreate(t, m, NewKey{Name: "ci", Owner: "team", Models: []string{"openai/gpt-4o", "claude"}, ExpiresAt: ptr(clk.Unix() + 3600)})
	clk.Add(time.Second)
	k2, secret2 := mustCreate(t, m, NewKey{Name: "laptop"})

	if !WellFormed(secret1) || !WellFormed(secret2) || secret1 == secret2 {
		t.Fatalf("secrets %q, %q", secret1, secret2)
	}
	if !validID(k1.ID) || !validID(k2.ID) || k1.ID == k2.ID {
		t.Fatalf("ids %q, %q", k1.ID, k2.ID)
	}
	want1 := Key{ID: k1.ID, Name: "ci", Owner: "team", Hint: Hint(secret1), Models: []string{"openai/gpt-4o", "claude"},
		CreatedAt: clk.Unix() - 1, ExpiresAt: ptr(clk.Unix() - 1 + 3600)}
	if !sameKey(k1, want1) {
		t.Fatalf("Create = %+v, want %+v", k1, want1)
	}
	if _, err := json.Marshal(k1); err != nil {
		t.Fatal(err)
	}
	if s.Exists(ctx, "modelgate/keys/"+k1.ID+".json") == false {
		t.Fatalf("no record at modelgate/keys/%s.json; storage: %v", k1.ID, s.snapshot())
	}

	// The index has them at once.
	if got, ok := m.Lookup(Digest(secret1)); !ok || got.ID != k1.ID {
		t.Fatalf("Lookup(secret1) = %+v, %v", got, ok)
	}
	if got, ok := m.Lookup(Digest(secret2)); !ok || got.ID != k2.ID || got.Owner != "laptop" {
		t.Fatalf("Lookup(secret2) = %+v, %v", got, ok)
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !sameKey(list[0], k1) || !sameKey(list[1], k2) {
		t.Fatalf("List = %+v", list)
	}
	got, err := m.Get(ctx, k2.ID)
	if err != nil || !sameKey(got, k2) {
		t.Fatalf("Get = %+v, %v", got, err)
	}

	if err := m.Delete(ctx, k1.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup(Digest(secret1)); ok {
		t.Error("deleted key still found by Lookup")
	}
	if _, err := m.Get(ctx, k1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(deleted) = %v, want ErrNotFound", err)
	}
	if err := m.Delete(ctx, k1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(deleted) = %v, want ErrNotFound", err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 1 || list[0].ID != k2.ID {
		t.Errorf("List after delete = %+v, %v", list, err)
	}
	if locks := s.heldLocks(); len(locks) != 0 {
		t.Errorf("locks left held: %v", locks)
	}
}

// sameKey compares keys by their JSON.
func sameKey(a, b Key) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestListEmptyAndOrder(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
	list, err := m.List(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("List on empty storage = %v, %v", list, err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatalf("Refresh on empty storage: %v", err)
	}
	var want []string
	for i := 0; i < 20; i++ {
		k, _ := mustCreate(t, m, NewKey{Name: fmt.Sprint("k", i)})
		want = append(want, k.ID)
		// IDs order keys created in one second by their millisecond.
		clk.Add(2 * time.Millisecond)
		if i%3 == 0 {
			clk.Add(time.Second)
		}
	}
	list, err = m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range list {
		if k.ID != want[i] {
			t.Fatalf("List[%d] = %s (%s), want %s", i, k.ID, k.Name, want[i])
		}
	}
}

func TestCreateValidation(t *testing.T) {
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	tests := []struct {
		name  string
		nk    NewKey
		param string // "" for accepted
	}{
		{"minimal", NewKey{Name: "a"}, ""},
		{"64 characters", NewKey{Name: strings.Repeat("é", 64)}, ""},
		{"spaces and symbols", NewKey{Name: "CI bot (prod) #1", Owner: "team@example.com"}, ""},
		{"100 models", NewKey{Name: "a", Models: many[:100]}, ""},
		{"future expiry", NewKey{Name: "a", ExpiresAt: ptr(clk.Unix() + 1)}, ""},
		{"no name", NewKey{}, "name"},
		{"name too long", NewKey{Name: strings.Repeat("a", 65)}, "name"},
		{"newline in name", NewKey{Name: "a\nb"}, "name"},
		{"NUL in name", NewKey{Name: "a\x00"}, "name"},
		{"DEL in name", NewKey{Name: "a\x7f"}, "name"},
		{"C1 control in name", NewKey{Name: "a\u0085"}, "name"},
		{"bad UTF-8 name", NewKey{Name: "a\xff"}, "name"},
		{"owner too long", NewKey{Name: "a", Owner: strings.Repeat("o", 65)}, "owner"},
		{"tab in owner", NewKey{Name: "a", Owner: "x\ty"}, "owner"},
		{"empty model", NewKey{Name: "a", Models: []string{"gpt-4o", ""}}, "models[1]"},
		{"101 models", NewKey{Name: "a", Models: many}, "models"},
		{"expiry now", NewKey{Name: "a", ExpiresAt: ptr(clk.Unix())}, "expires_at"},
		{"expiry past", NewKey{Name: "a", ExpiresAt: ptr(clk.Unix() - 100)}, "expires_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, secret, err := m.Create(context.Background(), tt.nk)
			if tt.param == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				if k.ID == "" || secret == "" {
					t.Fatalf("Create = %+v, %q", k, secret)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Create = %v, want an *InvalidError", err)
			}
			if !strings.Contains(err.Error(), tt.param) {
				t.Errorf("Error() = %q does not name %q", err.Error(), tt.param)
			}
			if ie.Param != tt.param || ie.Message == "" {
				t.Errorf("InvalidError = %+v, want param %q", ie, tt.param)
			}
			var plain InvalidError
			if !errors.As(err, &plain) || plain != *ie {
				t.Errorf("errors.As into an InvalidError value = %+v", plain)
			}
			if secret != "" || k.ID != "" {
				t.Errorf("refused Create returned %+v, %q", k, secret)
			}
		})
	}
	// Nothing refused reached storage.
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5 {
		t.Errorf("%d keys stored, want the 5 accepted", len(list))
	}
}

func TestOwnerDefault(t *testing.T) {
	m := NewManager(newMemStorage(), "modelgate")
	k, _ := mustCreate(t, m, NewKey{Name: "alice"})
	if k.Owner != "alice" {
		t.Errorf("Owner = %q, want the name", k.Owner)
	}
	k, _ = mustCreate(t, m, NewKey{Name: "alice-ci", Owner: "alice"})
	if k.Owner != "alice" {
		t.Errorf("Owner = %q, want alice", k.Owner)
	}
	got, err := m.Get(context.Background(), k.ID)
	if err != nil || got.Owner != "alice" {
		t.Errorf("Get = %+v, %v", got, err)
	}
}

func TestCreateCopiesInput(t *testing.T) {
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
	models := []string{"a", "b"}
	exp := clk.Unix() + 100
	nk := NewKey{Name: "n", Models: models, ExpiresAt: &exp}
	k, secret := mustCreate(t, m, nk)
	models[0] = "changed"
	exp = 1
	k.Models[1] = "changed too"
	got, ok := m.Lookup(Digest(secret))
	if !ok || got.Models[0] != "a" || got.Models[1] != "b" || *got.ExpiresAt != clk.Unix()+100 {
		t.Errorf("Lookup = %+v, %v: the index shares memory with the caller", got, ok)
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
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
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	a := clk.set(NewManager(s, "modelgate"))
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

func TestTouchWritesLastUsed(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	m := clk.set(NewManager(s, "modelgate"))
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
	stores := s.storeCount()

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
	if n := s.storeCount() - stores; n != 1 {
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
	stores = s.storeCount()
	clk.Add(5 * time.Minute)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.storeCount() - stores; n != 0 {
		t.Fatalf("%d stores without any use", n)
	}
	if locks := s.heldLocks(); len(locks) != 0 {
		t.Errorf("locks left held: %v", locks)
	}
}

// A key used on B and deleted on A is never written back by B.
func TestRefreshNeverResurrects(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	a := clk.set(NewManager(s, "modelgate"))
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
	for name := range s.snapshot() {
		if strings.Contains(name, k.ID) {
			t.Errorf("storage still holds %s", name)
		}
	}
}

func TestMarkExposed(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	a := clk.set(NewManager(s, "modelgate"))
	b := clk.set(NewManager(s, "modelgate"))
	k, secret := mustCreate(t, a, NewKey{Name: "leaky"})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	clk.Add(time.Hour)
	t1 := clk.Unix()
	e1 := Exposure{Reporter: "github", Type: "modelgate_api_key", URL: "https://github.com/o/r/blob/x/a.env", Source: "content"}
	got, first, err := a.MarkExposed(ctx, k.ID, e1)
	if err != nil || !first {
		t.Fatalf("MarkExposed = %+v, %v, %v", got, first, err)
	}
	if got.ExposedAt == nil || *got.ExposedAt != t1 || got.Exposure == nil || *got.Exposure != e1 {
		t.Fatalf("MarkExposed = %+v", got)
	}
	if idx, _ := a.Lookup(Digest(secret)); idx.ExposedAt == nil || *idx.ExposedAt != t1 {
		t.Fatalf("A's index not updated: %+v", idx)
	}

	clk.Add(time.Hour)
	e2 := Exposure{Reporter: "gitlab", Type: "modelgate_api_key", URL: "https://gitlab.com/x", Source: "commit"}
	got, first, err = b.MarkExposed(ctx, k.ID, e2)
	if err != nil || first {
		t.Fatalf("second MarkExposed = %+v, %v, %v", got, first, err)
	}
	if got.ExposedAt == nil || *got.ExposedAt != t1 || *got.Exposure != e1 {
		t.Fatalf("second report changed the first: %+v", got)
	}
	if idx, _ := b.Lookup(Digest(secret)); idx.ExposedAt == nil || *idx.ExposedAt != t1 {
		t.Fatalf("B's index not updated: %+v", idx)
	}
	stored, err := a.Get(ctx, k.ID)
	if err != nil || stored.ExposedAt == nil || *stored.ExposedAt != t1 || *stored.Exposure != e1 {
		t.Fatalf("Get = %+v, %v", stored, err)
	}

	if _, _, err := a.MarkExposed(ctx, "key_00000000000000000000000000", e1); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkExposed(malformed id) = %v", err)
	}
	if _, _, err := a.MarkExposed(ctx, "key_000000000000000000000000", e1); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkExposed(unknown id) = %v", err)
	}
	if locks := s.heldLocks(); len(locks) != 0 {
		t.Errorf("locks left held: %v", locks)
	}
}

func TestFindByDigest(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
	k, secret := mustCreate(t, m, NewKey{Name: "x", ExpiresAt: ptr(clk.Unix() + 1)})
	clk.Add(time.Hour)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, found, err := m.FindByDigest(ctx, Digest(secret))
	if err != nil || !found || got.ID != k.ID || got.Name != "x" {
		t.Fatalf("FindByDigest(expired) = %+v, %v, %v", got, found, err)
	}
	other, _ := Generate()
	if _, found, err := m.FindByDigest(ctx, Digest(other)); err != nil || found {
		t.Fatalf("FindByDigest(unknown) = %v, %v", found, err)
	}
}

// Storage holds neither a secret nor its random part, and the admin
// API's JSON has no digest.
func TestStorageHoldsNoSecret(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := newMemStorage()
	m := clk.set(NewManager(s, "modelgate"))
	var secrets []string
	var ids []string
	for i := 0; i < 10; i++ {
		k, secret := mustCreate(t, m, NewKey{Name: fmt.Sprint("k", i), Models: []string{"m"}})
		secrets = append(secrets, secret)
		ids = append(ids, k.ID)
		m.Touch(k.ID)
	}
	clk.Add(time.Minute)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.MarkExposed(ctx, ids[0], Exposure{Reporter: "github", URL: "u"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}

	snap := s.snapshot()
	if len(snap) != 9 {
		t.Errorf("%d values in storage, want 9: %v", len(snap), snap)
	}
	for name, value := range snap {
		if !strings.HasPrefix(name, "modelgate/keys/key_") || path.Ext(name) != ".json" {
			t.Errorf("unexpected storage key %q", name)
		}
		for _, secret := range secrets {
			body := secret[4:34]
			for _, b := range [][]byte{[]byte(name), value} {
				if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(body)) {
					t.Fatalf("storage %s holds a secret or its random part", name)
				}
				// Nor any 12 consecutive characters of the random part.
				for j := 0; j+12 <= len(body); j++ {
					if bytes.Contains(b, []byte(body[j:j+12])) {
						t.Fatalf("storage %s holds %q of a secret's random part", name, body[j:j+12])
					}
				}
			}
		}
		if !bytes.Contains(value, []byte(`"sha256":"`)) {
			t.Errorf("record %s has no sha256: %s", name, value)
		}
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(map[string]any{"data": list})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	jg, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{j, jg} {
		if bytes.Contains(b, []byte("sha256")) {
			t.Errorf("JSON holds the digest: %s", b)
		}
		for _, secret := range secrets {
			if bytes.Contains(b, []byte(secret[4:34])) {
				t.Errorf("JSON holds a secret: %s", b)
			}
		}
	}
}

func TestKeyJSON(t *testing.T) {
	b, err := json.Marshal(Key{ID: "key_x", Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"key_x","name":"n","owner":"","hint":"","models":[],"created_at":0,"last_used_at":null,"expires_at":null,"exposed_at":null}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	b, err = json.Marshal(&Key{Models: []string{"a"}, ExposedAt: ptr(5), Exposure: &Exposure{Reporter: "github"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"models":["a"]`)) || !bytes.Contains(b, []byte(`"exposure":{"reporter":"github","type":"","url":"","source":""}`)) {
		t.Errorf("Marshal = %s", b)
	}
	// A created key without models lists [] too, from Create and from storage.
	m := NewManager(newMemStorage(), "modelgate")
	k, _ := mustCreate(t, m, NewKey{Name: "n"})
	g, err := m.Get(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{k, g} {
		b, _ := json.Marshal(k)
		if !bytes.Contains(b, []byte(`"models":[]`)) {
			t.Errorf("Marshal = %s", b)
		}
	}
}

// IDs from a URL never become storage paths outside the keys folder.
func TestBadIDs(t *testing.T) {
	ctx := context.Background()
	s := newMemStorage()
	m := NewManager(s, "modelgate")
	k, _ := mustCreate(t, m, NewKey{Name: "n"})
	// Something a traversal might reach.
	if err := s.Store(ctx, "modelgate/secret.json", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	before := s.snapshot()
	for _, id := range []string{
		"", "key_", "../secret", "key_../../secret", "key_/../../secret.json",
		k.ID + "/", k.ID + ".json", "KEY" + k.ID[3:], strings.ToUpper(k.ID), k.ID[:len(k.ID)-1], k.ID + "0",
		"key_" + strings.Repeat(".", 24), "key_" + strings.Repeat("w", 24), "key_0000000000000000000000/x",
	} {
		if _, err := m.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v", id, err)
		}
		if err := m.Delete(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Delete(%q) = %v", id, err)
		}
		if _, _, err := m.MarkExposed(ctx, id, Exposure{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("MarkExposed(%q) = %v", id, err)
		}
		m.Touch(id)
	}
	after := s.snapshot()
	if len(after) != len(before) {
		t.Fatalf("storage changed: %d values, was %d", len(after), len(before))
	}
	for name, v := range before {
		if !bytes.Equal(after[name], v) {
			t.Errorf("%s changed", name)
		}
	}
}

func TestRefreshKeepsIndexOnError(t *testing.T) {
	ctx := context.Background()
	s := newMemStorage()
	m := NewManager(s, "modelgate")
	_, secret := mustCreate(t, m, NewKey{Name: "n"})
	boom := errors.New("storage down")
	s.fail(boom)
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
}

func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	s := newMemStorage()
	a := NewManager(s, "modelgate")
	k1, secret1 := mustCreate(t, a, NewKey{Name: "one"})
	k2, secret2 := mustCreate(t, a, NewKey{Name: "two"})
	// Another storage's temporary file is ignored.
	if err := s.Store(ctx, "modelgate/keys/.tmp123", []byte("partial")); err != nil {
		t.Fatal(err)
	}
	if err := s.Store(ctx, "modelgate/keys/"+k1.ID+".json", []byte(`{"id":`)); err != nil {
		t.Fatal(err)
	}
	b := NewManager(s, "modelgate")
	for _, m := range []*Manager{a, b} {
		err := m.Refresh(ctx)
		if err == nil || !strings.Contains(err.Error(), k1.ID) {
			t.Fatalf("Refresh = %v, want an error naming %s", err, k1.ID)
		}
		if _, ok := m.Lookup(Digest(secret2)); !ok {
			t.Fatal("a corrupt record hid the others")
		}
	}
	// A knew the key before: it keeps it; B never read it.
	if _, ok := a.Lookup(Digest(secret1)); !ok {
		t.Error("A forgot a key whose record became unreadable")
	}
	if _, ok := b.Lookup(Digest(secret1)); ok {
		t.Error("B found a key it could not read")
	}
	if _, err := a.List(ctx); err == nil {
		t.Error("List hid a corrupt record")
	}
	_ = k2
}

// A copied record (two keys with one digest) makes neither work.
func TestDuplicateDigest(t *testing.T) {
	ctx := context.Background()
	s := newMemStorage()
	m := NewManager(s, "modelgate")
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
	s := newMemStorage()
	m := NewManager(s, "modelgate")
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
	m := NewManager(newMemStorage(), "modelgate")
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

// The same life of a key on certmagic's FileStorage, which deletes a
// missing key without an error and lists with temporary files about.
func TestFileStorage(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	fsys := &certmagic.FileStorage{Path: t.TempDir()}
	a := clk.set(NewManager(fsys, "modelgate"))
	b := clk.set(NewManager(fsys, "modelgate"))
	if err := a.Refresh(ctx); err != nil {
		t.Fatalf("Refresh of an empty storage: %v", err)
	}
	if list, err := a.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List of an empty storage = %v, %v", list, err)
	}
	k, secret := mustCreate(t, a, NewKey{Name: "fs", Models: []string{"x"}})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(Digest(secret)); !ok {
		t.Fatal("B does not know A's key after Refresh")
	}
	clk.Add(time.Minute)
	b.Touch(k.ID)
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, k.ID); err != nil || got.LastUsedAt == nil || *got.LastUsedAt != clk.Unix() {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, first, err := a.MarkExposed(ctx, k.ID, Exposure{Reporter: "github"}); err != nil || !first {
		t.Fatalf("MarkExposed = %v, %v", first, err)
	}
	if got, found, err := b.FindByDigest(ctx, Digest(secret)); err != nil || !found || got.ExposedAt == nil {
		t.Fatalf("FindByDigest = %+v, %v, %v", got, found, err)
	}
	clk.Add(time.Minute)
	b.Touch(k.ID)
	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, k.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if fsys.Exists(ctx, "modelgate/keys/"+k.ID+".json") {
		t.Fatal("B's Refresh recreated the deleted key")
	}
	if _, ok := b.Lookup(Digest(secret)); ok {
		t.Fatal("B still knows the deleted key")
	}
}

// populate stores n keys directly and loads them with one Refresh.
func populate(tb testing.TB, m *Manager, n int) [][32]byte {
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
	if err := m.Refresh(ctx); err != nil {
		tb.Fatal(err)
	}
	if got := len(m.idx.Load().byID); got != n {
		tb.Fatalf("%d keys loaded, want %d", got, n)
	}
	return digests
}

func BenchmarkLookup(b *testing.B) {
	m := NewManager(newMemStorage(), "modelgate")
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
	m := NewManager(newMemStorage(), "modelgate")
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

// TestListShowsUseBeforeItIsWritten: List and Get show the last use this
// process noted, though storage gets it at most once a minute.
func TestListShowsUseBeforeItIsWritten(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := clk.set(NewManager(newMemStorage(), "modelgate"))
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
