package gateway

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// TestBatchLineKey: a batch line runs under the key that created its
// batch, with that key's own policy as it is now, or not at all
// (errKeyGone), never under the defaults: a managed key deleted, a static
// key no longer in the config, a key of another owner, a batch that
// records no key. A managed key this instance has not loaded yet is found
// in the storage; a storage that cannot be read decides nothing.
func TestBatchLineKey(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	a := &Gateway{managed: keys.NewManager(mem, "modelgate"), static: map[string]*Key{"alice": {Name: "alice", Owner: "alice"}}}
	limits := &keys.Limits{RequestsPerMinute: 7}
	budget := &keys.Budget{USD: "1", Period: "day"}
	here, _, err := a.managed.Create(ctx, keys.NewKey{Name: "here", Owner: "team", Limits: limits, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	// Created on another instance: in the storage, not yet in this index.
	elsewhere, _, err := keys.NewManager(mem, "modelgate").Create(ctx, keys.NewKey{Name: "elsewhere", Owner: "team", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	deleted, _, err := a.managed.Create(ctx, keys.NewKey{Name: "deleted", Owner: "team", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.managed.Delete(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		req  batch.Request
		want *Key // nil: errKeyGone
	}{
		{"managed", batch.Request{Owner: "team", KeyID: here.ID, KeyName: "here"},
			&Key{Name: "here", Owner: "team", ID: here.ID, Limits: limits, Budget: budget}},
		{"managed, created elsewhere", batch.Request{Owner: "team", KeyID: elsewhere.ID, KeyName: "elsewhere"},
			&Key{Name: "elsewhere", Owner: "team", ID: elsewhere.ID, Limits: limits}},
		{"managed, deleted", batch.Request{Owner: "team", KeyID: deleted.ID, KeyName: "deleted"}, nil},
		{"managed, never was", batch.Request{Owner: "team", KeyID: "key_06h0f3dmbnbda28kaqnrfi69", KeyName: "x"}, nil},
		{"managed, another owner's", batch.Request{Owner: "alice", KeyID: here.ID, KeyName: "here"}, nil},
		{"static", batch.Request{Owner: StaticOwnerPrefix + "alice", KeyName: "alice"}, &Key{Name: "alice", Owner: "alice"}},
		// Created before static keys' owners were kept apart.
		{"static, kept under its name", batch.Request{Owner: "alice", KeyName: "alice"}, &Key{Name: "alice", Owner: "alice"}},
		{"static, another owner's", batch.Request{Owner: StaticOwnerPrefix + "bob", KeyName: "alice"}, nil},
		{"static, no longer configured", batch.Request{Owner: StaticOwnerPrefix + "carol", KeyName: "carol"}, nil},
		{"no key recorded", batch.Request{Owner: "alice"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.batchLineKey(ctx, tc.req)
			if tc.want == nil {
				if !errors.Is(err, errKeyGone) {
					t.Fatalf("got %+v, %v; want errKeyGone", got, err)
				}
				if gone, err := a.BatchKeyGone(ctx, tc.req.Owner, tc.req.KeyID, tc.req.KeyName); !gone || err != nil {
					t.Errorf("batchKeyGone = %v, %v; want gone", gone, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.Owner != tc.want.Owner || got.ID != tc.want.ID ||
				!samePolicy(got.Limits, tc.want.Limits) || !samePolicy(got.Budget, tc.want.Budget) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if gone, err := a.BatchKeyGone(ctx, tc.req.Owner, tc.req.KeyID, tc.req.KeyName); gone || err != nil {
				t.Errorf("batchKeyGone = %v, %v; want not gone", gone, err)
			}
		})
	}

	// The storage cannot be read: a key missing from the index is
	// neither gone nor there.
	mem.Fail(errors.New("storage down"))
	gone, err := a.BatchKeyGone(ctx, "team", deleted.ID, "deleted")
	if gone || err == nil {
		t.Errorf("with the storage down: gone %v, %v; want an error", gone, err)
	}
	if k, err := a.batchLineKey(ctx, batch.Request{Owner: "team", KeyID: here.ID}); err != nil || k.ID != here.ID {
		t.Errorf("a key in the index, with the storage down: %+v, %v", k, err)
	}
}

func samePolicy[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestBatchExecutorKeyGone: the executor does not run a line whose key is
// gone (nothing is served, nothing scanned) and says so with KeyGone; one
// whose key cannot be read now gets a 503 the runner retries.
func TestBatchExecutorKeyGone(t *testing.T) {
	mem := storagetest.NewMemory()
	obs := &countingObserver{}
	g, err := New(Config{Managed: keys.NewManager(mem, "modelgate"), Observer: obs, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ex := g.BatchExecutor()
	req := batch.Request{BatchID: "batch_x", CustomID: "a", Owner: "team", KeyID: "key_06h0f3dmbnbda28kaqnrfi69", Endpoint: batch.EndpointChat,
		Body: []byte(`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)}

	if resp := ex.Do(context.Background(), req); !resp.KeyGone || resp.Status != 0 {
		t.Errorf("a line of a revoked key: %+v, want KeyGone and no answer", resp)
	}

	mem.Fail(errors.New("storage down"))
	resp := ex.Do(context.Background(), req)
	if resp.KeyGone || resp.Status != 503 || resp.Final {
		t.Errorf("a line whose key cannot be read now: %+v, want a 503 to retry", resp)
	}
	if n := obs.answered(); n != 0 {
		t.Errorf("%d lines that did not run were served (and scanned)", n)
	}
}

// TestStorageOwner: a static key and a managed key whose owner is the
// static key's name keep what they own apart; managed keys of one owner
// share it.
func TestStorageOwner(t *testing.T) {
	static := &Key{Name: "alice", Owner: "alice"}
	named := &Key{Name: "alice", Owner: "alice", ID: "key_1"}
	owned := &Key{Name: "ci", Owner: "alice", ID: "key_2"}
	if static.StorageOwner() == named.StorageOwner() || static.StorageOwner() == owned.StorageOwner() {
		t.Errorf("static %q, managed %q and %q: a managed key shares a static key's owner", static.StorageOwner(), named.StorageOwner(), owned.StorageOwner())
	}
	if named.StorageOwner() != owned.StorageOwner() || owned.StorageOwner() != "alice" {
		t.Errorf("managed keys of owner alice: %q and %q", named.StorageOwner(), owned.StorageOwner())
	}
	for _, k := range []*Key{static, named, owned} {
		if got := OwnerName(k.StorageOwner()); got != "alice" {
			t.Errorf("OwnerName(%q) = %q, want alice", k.StorageOwner(), got)
		}
	}
}

// BenchmarkBatchLineKey is what finding its key costs each batch line: a
// managed key in the index, a static key.
func BenchmarkBatchLineKey(b *testing.B) {
	ctx := context.Background()
	a := &Gateway{managed: keys.NewManager(storagetest.NewMemory(), "modelgate"), static: map[string]*Key{"alice": {Name: "alice", Owner: "alice"}}}
	mk, _, err := a.managed.Create(ctx, keys.NewKey{Name: "ci", Owner: "team"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		req  batch.Request
	}{
		{"managed", batch.Request{Owner: "team", KeyID: mk.ID, KeyName: "ci"}},
		{"static", batch.Request{Owner: StaticOwnerPrefix + "alice", KeyName: "alice"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.batchLineKey(ctx, bc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
