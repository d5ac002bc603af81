package keys

import (
	"context"
	"testing"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstore"
)

// redisStorage is a storage on the Redis server at addr, with a client of
// its own, as each instance of a cluster has.
func redisStorage(t *testing.T, addr string) *redisstore.Storage {
	t.Helper()
	rdb, err := redisclient.New(redisclient.Options{Addresses: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(rdb, redisstore.Options{KeyPrefix: "keys-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); _ = rdb.Close() })
	return s
}

// TestDigestIndexOnRedis: instances sharing a Redis storage find each
// other's keys by digest before any Refresh, with two reads and no
// listing; a key deleted on one is found on none; keys stored without an
// index record get one at the next Refresh of any instance.
func TestDigestIndexOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server")
	}
	ctx := context.Background()
	srv := redistest.Start(t)
	a := NewManager(redisStorage(t, srv.Addr), "modelgate")
	bs := &countingStorage{Storage: redisStorage(t, srv.Addr)}
	b := NewManager(bs, "modelgate")
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	k, secret := mustCreate(t, a, NewKey{Name: "made-on-a"})
	bs.reads()
	got, found, err := b.FindByDigest(ctx, Digest(secret))
	if err != nil || !found || got.ID != k.ID {
		t.Fatalf("b.FindByDigest of a's new key = %+v, %v, %v", got, found, err)
	}
	if loads, lists := bs.reads(); loads != 2 || lists != 0 {
		t.Errorf("b read %d values and listed %d times to find a's key", loads, lists)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	// b still has the key in memory: its record is the authority.
	if _, found, err := b.FindByDigest(ctx, Digest(secret)); err != nil || found {
		t.Fatalf("b.FindByDigest of a key a deleted = %v, %v", found, err)
	}

	digests := storeRecords(t, a, 5)
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c := NewManager(redisStorage(t, srv.Addr), "modelgate") // never refreshed
	for i, d := range digests {
		if _, found, err := c.FindByDigest(ctx, d); err != nil || !found {
			t.Errorf("key %d stored without an index record, after b's Refresh: found %v, %v", i, found, err)
		}
	}
}
