package redisstore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstore"
)

// The storage works on a Redis Cluster: its scripts touch keys of one
// hash slot only, and two gateways' prefixes may land on different nodes.
func TestCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	ctx := context.Background()
	for _, prefix := range []string{"gw-a", "gw-b", "gw-c", "caddy"} {
		rdb, err := redisclient.New(redisclient.Options{Addresses: addrs})
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		s, err := redisstore.New(rdb, redisstore.Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range 5 {
			if err := s.Store(ctx, fmt.Sprintf("certificates/acme/site%d/site.crt", i), []byte("pem")); err != nil {
				t.Fatalf("%s: Store: %v", prefix, err)
			}
		}
		keys, err := s.List(ctx, "certificates/acme", false)
		if err != nil || len(keys) != 5 {
			t.Fatalf("%s: List = %v, %v", prefix, keys, err)
		}
		if ki, err := s.Stat(ctx, "certificates/acme/site1/site.crt"); err != nil || !ki.IsTerminal || ki.Size != 3 {
			t.Fatalf("%s: Stat = %+v, %v", prefix, ki, err)
		}
		if err := s.Lock(ctx, "issue"); err != nil {
			t.Fatalf("%s: Lock: %v", prefix, err)
		}
		if err := s.Unlock(ctx, "issue"); err != nil {
			t.Fatalf("%s: Unlock: %v", prefix, err)
		}
		if err := s.Delete(ctx, "certificates"); err != nil {
			t.Fatalf("%s: Delete: %v", prefix, err)
		}
		if keys, _ := s.List(ctx, "", true); !reflect.DeepEqual(keys, []string(nil)) {
			t.Fatalf("%s: left %v", prefix, keys)
		}
	}
}
