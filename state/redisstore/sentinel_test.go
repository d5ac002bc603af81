package redisstore_test

import (
	"context"
	"testing"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstore"
)

// Through Sentinel: the client asks the Sentinel for the master and
// stores there.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	opts := redisclient.Options{Addresses: []string{sentinel.Addr}, MasterName: "mymaster"}
	if opts.Mode() != "sentinel" {
		t.Fatalf("mode %s", opts.Mode())
	}
	rdb, err := redisclient.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	s, err := redisstore.New(rdb, redisstore.Options{KeyPrefix: "sen"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Store(ctx, "certificates/a.crt", []byte("pem")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Load(ctx, "certificates/a.crt"); err != nil || string(b) != "pem" {
		t.Fatalf("Load = %q, %v", b, err)
	}
	if err := s.Lock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	// It went to the master the Sentinel names.
	direct := newStore(t, master.Addr, redisstore.Options{KeyPrefix: "sen"})
	if !direct.Exists(ctx, "certificates/a.crt") {
		t.Fatal("the value is not on the master")
	}
}
