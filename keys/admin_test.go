package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCreateListGetDelete(t *testing.T) {
	ctx, clk, m, s := setup()

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
		t.Fatalf("no record at modelgate/keys/%s.json; storage: %v", k1.ID, s.Snapshot())
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
	checkNoLocks(t, s)
}

func TestListEmptyAndOrder(t *testing.T) {
	ctx, clk, m, _ := setup()
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
	m, _ := newManager(clk)
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
		// The gateway keeps static keys' files, batches and responses
		// under "\x00static:<name>", an owner no managed key may have.
		{"a static key's storage owner", NewKey{Name: "a", Owner: "\x00static:alice"}, "owner"},
		{"a static key's storage owner as name", NewKey{Name: "\x00static:alice"}, "name"},
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
	m, _ := newManager(nil)
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
	m, _ := newManager(clk)
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

// IDs from a URL never become storage paths outside the keys folder.
func TestBadIDs(t *testing.T) {
	ctx := context.Background()
	m, s := newManager(nil)
	k, _ := mustCreate(t, m, NewKey{Name: "n"})
	// Something a traversal might reach.
	if err := s.Store(ctx, "modelgate/secret.json", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot()
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
	after := s.Snapshot()
	if len(after) != len(before) {
		t.Fatalf("storage changed: %d values, was %d", len(after), len(before))
	}
	for name, v := range before {
		if !bytes.Equal(after[name], v) {
			t.Errorf("%s changed", name)
		}
	}
}
