package keys

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
)

// TestFindByDigestReadsFewRecords: a leak report's lookup reads the records
// it needs — the digest's index record and the key's own — never every key
// in storage, whether the digest is unknown (anyone can write a
// well-formed key), the key is in this Manager's memory, or another
// Manager created it since this one last refreshed.
func TestFindByDigestReadsFewRecords(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	cs := &countingStorage{Storage: mem}
	a := NewManager(cs, "modelgate")
	for i := range 50 {
		mustCreate(t, a, NewKey{Name: fmt.Sprint("k", i)})
	}
	b := NewManager(cs, "modelgate") // another instance on the storage
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	known, knownSecret := mustCreate(t, b, NewKey{Name: "known"})
	fresh, freshSecret := mustCreate(t, a, NewKey{Name: "fresh"}) // b has not refreshed since
	unknown, _ := Generate()

	for _, tc := range []struct {
		name     string
		secret   string
		want     string // the key id, "" for none
		maxLoads int64
	}{
		{"unknown", unknown, "", 1},
		{"in memory", knownSecret, known.ID, 1},
		{"created by another instance", freshSecret, fresh.ID, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs.reads()
			k, found, err := b.FindByDigest(ctx, Digest(tc.secret))
			if err != nil || found != (tc.want != "") || k.ID != tc.want {
				t.Fatalf("FindByDigest = %+v, %v, %v; want %q", k, found, err, tc.want)
			}
			if loads, lists := cs.reads(); loads > tc.maxLoads || lists != 0 {
				t.Errorf("%d loads and %d lists, want at most %d loads and no list", loads, lists, tc.maxLoads)
			}
		})
	}
}

// TestDigestIndex: Create writes a key's digest index record, Delete
// removes it, and Refresh writes the records of keys stored without one
// (by an earlier version, or another instance running one), once per key
// per Manager; a Manager that never refreshed then finds them by digest.
func TestDigestIndex(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	cs := &countingStorage{Storage: mem}
	a := NewManager(cs, "modelgate")
	k, secret := mustCreate(t, a, NewKey{Name: "new"})
	d := Digest(secret)
	idxKey := "modelgate/key_digests/" + hex.EncodeToString(d[:])
	if v, err := mem.Load(ctx, idxKey); err != nil || string(v) != `{"id":"`+k.ID+`"}` {
		t.Fatalf("the digest index record after Create: %s, %v", v, err)
	}
	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Load(ctx, idxKey); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the digest index record after Delete: %v", err)
	}

	// Keys as an earlier version stored them: the record alone.
	old := NewManager(cs, "modelgate")
	digests := storeRecords(t, old, 20)
	fresh := NewManager(cs, "modelgate") // it never refreshes
	if _, found, err := fresh.FindByDigest(ctx, digests[0]); err != nil || found {
		t.Fatalf("before any Refresh wrote its index record, a key stored the earlier way: found %v, %v", found, err)
	}
	if err := old.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range digests {
		if _, err := mem.Load(ctx, "modelgate/key_digests/"+hex.EncodeToString(d[:])); err != nil {
			t.Fatalf("Refresh wrote no digest index record: %v", err)
		}
	}
	cs.reads()
	for i, d := range digests {
		if _, found, err := fresh.FindByDigest(ctx, d); err != nil || !found {
			t.Fatalf("key %d of the earlier layout: found %v, %v", i, found, err)
		}
	}
	if loads, lists := cs.reads(); loads != 2*int64(len(digests)) || lists != 0 {
		t.Errorf("%d loads, %d lists for %d keys", loads, lists, len(digests))
	}
	// A later Refresh reads each record once, no index record again.
	if err := old.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if loads, _ := cs.reads(); loads != int64(len(digests)) {
		t.Errorf("a second Refresh loaded %d values for %d keys", loads, len(digests))
	}
}

// A Create whose record cannot be written leaves no digest index record.
func TestCreateFailureLeavesNoDigestRecord(t *testing.T) {
	ctx, _, m, s := setup()
	boom := errors.New("disk full")
	s.OnStore(func(key string, _ []byte) error {
		if len(key) > len("modelgate/keys/") && key[:len("modelgate/keys/")] == "modelgate/keys/" {
			return boom
		}
		return nil
	})
	if _, _, err := m.Create(ctx, NewKey{Name: "x"}); !errors.Is(err, boom) {
		t.Fatalf("Create = %v", err)
	}
	if snap := s.Snapshot(); len(snap) != 0 {
		t.Errorf("storage holds %v after a failed Create", snap)
	}
}

// Known answers from memory, expired keys included, and allocates nothing.
func TestKnown(t *testing.T) {
	_, clk, m, _ := setup()
	k, secret := mustCreate(t, m, NewKey{Name: "short", ExpiresAt: ptr(clk.Unix() + 1)})
	clk.Add(time.Hour)
	d := Digest(secret)
	if _, ok := m.Lookup(d); ok {
		t.Fatal("Lookup found an expired key")
	}
	var got Key
	var ok bool
	if n := testing.AllocsPerRun(100, func() { got, ok = m.Known(d) }); n != 0 || !ok || got.ID != k.ID {
		t.Fatalf("Known(expired) = %+v, %v, %v allocations", got, ok, n)
	}
	other, _ := Generate()
	if _, ok := m.Known(Digest(other)); ok {
		t.Fatal("Known found an unknown digest")
	}
}
