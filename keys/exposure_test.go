package keys

import (
	"errors"
	"testing"
	"time"
)

func TestMarkExposed(t *testing.T) {
	ctx, clk, a, s := setup()
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
	checkNoLocks(t, s)
}

func TestFindByDigest(t *testing.T) {
	ctx, clk, m, _ := setup()
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
