package respcache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
)

var prefixes atomic.Int64

// onRedis returns n States on srv, each on its own client as n instances
// would hold them, under a prefix of their own.
func onRedis(t testing.TB, srv *redistest.Server, n int) []*redisstate.State {
	t.Helper()
	prefix := fmt.Sprintf("rc%d:", prefixes.Add(1))
	out := make([]*redisstate.State, n)
	for i := range out {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
		out[i] = st
	}
	return out
}

func TestCacheOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	t.Run("StoreLookup", func(t *testing.T) { testStoreLookup(t, NewShared(onRedis(t, srv, 1)[0])) })

	// One instance stores, another answers from it.
	t.Run("AcrossInstances", func(t *testing.T) {
		st := onRedis(t, srv, 2)
		a, err := New(Config{}, NewShared(st[0]))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(Config{}, NewShared(st[1]))
		ctx := context.Background()
		k := mustKey(t, Request{Account: "acme", API: Chat, Model: "openai/gpt-4o", Body: []byte(`{"model":"gpt-4o","messages":[]}`)})
		if err := a.Store(ctx, k, Chat, Entry{Body: []byte(storedChat), Usage: Usage{Prompt: 9, Completion: 1}}); err != nil {
			t.Fatal(err)
		}
		e, ok, err := b.Lookup(ctx, k)
		if err != nil || !ok || string(e.Body) != storedChat || e.Usage.Prompt != 9 {
			t.Fatalf("the other instance: %+v, %v, %v", e, ok, err)
		}
	})

	// Redis expires an entry by the ttl the cache gives it.
	t.Run("Expiry", func(t *testing.T) {
		s := NewShared(onRedis(t, srv, 1)[0])
		ctx := context.Background()
		if err := s.Set(ctx, keyN(1), entryOf(storedChat), 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if !has(t, s, keyN(1)) {
			t.Fatal("missing before its ttl")
		}
		time.Sleep(350 * time.Millisecond)
		if has(t, s, keyN(1)) {
			t.Fatal("Redis kept an entry past its ttl")
		}
	})
}
