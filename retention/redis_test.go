package retention

import (
	"context"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/state/redisstore"
)

// redisInstance is what one instance of a cluster on Redis has: its own
// client, the storage and the state on it.
type redisInstance struct {
	storage *redisstore.Storage
	state   *redisstate.State
}

func redisInstances(t *testing.T, n int) []redisInstance {
	t.Helper()
	srv := redistest.Start(t)
	out := make([]redisInstance, n)
	for i := range out {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}, Timeout: redisclient.Duration(5 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		s, err := redisstore.New(rdb, redisstore.Options{KeyPrefix: "rt"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: "rt:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
		out[i] = redisInstance{storage: s, state: st}
	}
	return out
}

// On a cluster sharing a Redis storage and state, the instances sweep
// once between them, each expired object is deleted once, and the
// owner's count, seeded and given back across them, is what is left;
// reservations from every instance at once never pass the quota.
func TestRetentionOnRedis(t *testing.T) {
	ctx := context.Background()
	inst := redisInstances(t, 3)
	clk := newClock()
	for i := range 20 {
		expires := clk.at(time.Minute)
		if i%4 == 0 {
			expires = time.Time{}
		}
		putThing(t, inst[0].storage, "alice", fmt.Sprintf("t-%02d", i), expires, 100)
	}
	alice := storage.OwnerDir("mg", "alice")
	kinds := make([]*thingKind, len(inst))
	ledgers := make([]*Ledger, len(inst))
	for i, in := range inst {
		kinds[i] = &thingKind{s: in.storage}
		ledgers[i] = NewLedger(in.state, time.Hour, kinds[i])
	}
	if used, err := ledgers[1].Used(ctx, alice); err != nil || used != 2000 {
		t.Fatalf("alice's count: %d %v", used, err)
	}
	clk.advance(time.Minute)

	var swept atomic.Int64
	var wg sync.WaitGroup
	for i, in := range inst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := &Sweeper{Storage: in.storage, Prefix: "mg", Kinds: []Kind{kinds[i]}, Ledger: ledgers[i], Interval: time.Hour, Now: clk.now}
			res, err := sw.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			if res.Swept {
				swept.Add(1)
			}
		}()
	}
	wg.Wait()
	var deleted int64
	for _, k := range kinds {
		deleted += k.deleted.Load()
	}
	if swept.Load() != 1 || deleted != 15 {
		t.Errorf("%d instances swept, %d deletions; want 1 and 15", swept.Load(), deleted)
	}
	if used, err := ledgers[2].Used(ctx, alice); err != nil || used != 500 {
		t.Errorf("alice's count after the sweep: %d %v, want 500", used, err)
	}
	if keys, err := inst[2].storage.List(ctx, path.Join(alice, "things"), false); err != nil || len(keys) != 5 {
		t.Errorf("left: %v %v", keys, err)
	}

	var admitted atomic.Int64
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := ledgers[i%len(ledgers)].Reserve(ctx, alice, 100, 3000); err != nil {
				t.Error(err)
			} else if ok {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if used, _ := ledgers[0].Used(ctx, alice); admitted.Load() != 25 || used != 3000 {
		t.Errorf("%d reservations of 100 admitted from 500 to a quota of 3000 (counted %d), want 25", admitted.Load(), used)
	}
}
