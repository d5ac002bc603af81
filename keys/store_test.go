package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// Storage holds neither a secret nor its random part, and the admin
// API's JSON has no digest.
func TestStorageHoldsNoSecret(t *testing.T) {
	ctx, clk, m, s := setup()
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

	// Nine records and their nine digest index records (the deleted
	// key's went with it).
	snap := s.Snapshot()
	if len(snap) != 18 {
		t.Errorf("%d values in storage, want 18: %v", len(snap), snap)
	}
	for name, value := range snap {
		digest, isIndex := strings.CutPrefix(name, "modelgate/key_digests/")
		isRecord := strings.HasPrefix(name, "modelgate/keys/key_") && path.Ext(name) == ".json"
		if !isIndex && !isRecord {
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
		switch {
		case isRecord && !bytes.Contains(value, []byte(`"sha256":"`)):
			t.Errorf("record %s has no sha256: %s", name, value)
		case isIndex:
			var r struct{ ID string }
			if err := json.Unmarshal(value, &r); err != nil || r.ID == ids[1] {
				t.Errorf("digest index record %s: %s", name, value)
			}
			if rec := snap["modelgate/keys/"+r.ID+".json"]; !bytes.Contains(rec, []byte(`"sha256":"`+digest+`"`)) {
				t.Errorf("digest index record %s names %s, whose record is %s", name, r.ID, rec)
			}
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

func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	a, s := newManager(nil)
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
