package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisstore"
)

// BenchmarkStorage compares Redis (appendfsync everysec, what production
// runs) with Caddy's file system storage on small values: one operation
// per iteration, from one goroutine (latency) and from many (throughput,
// -cpu sets how many).
func BenchmarkStorage(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	stores := []struct {
		name string
		s    certmagic.Storage
	}{
		{"redis", newStore(b, srv.Addr, redisstore.Options{KeyPrefix: "bench"})},
		{"file_system", &certmagic.FileStorage{Path: b.TempDir()}},
	}
	ctx := context.Background()
	value := make([]byte, 512)
	for _, st := range stores {
		s := st.s
		for i := range 100 {
			_ = s.Store(ctx, fmt.Sprintf("list/dir/%03d", i), value)
		}
		b.Run(st.name+"/Store", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := s.Store(ctx, fmt.Sprintf("a/b/c/%d", i%1000), value); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(st.name+"/Load", func(b *testing.B) {
			_ = s.Store(ctx, "a/b/load", value)
			for b.Loop() {
				if _, err := s.Load(ctx, "a/b/load"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/List100", func(b *testing.B) {
			for b.Loop() {
				if keys, err := s.List(ctx, "list/dir", false); err != nil || len(keys) != 100 {
					b.Fatal(len(keys), err)
				}
			}
		})
		b.Run(st.name+"/LockUnlock", func(b *testing.B) {
			for b.Loop() {
				if err := s.Lock(ctx, "bench"); err != nil {
					b.Fatal(err)
				}
				if err := s.Unlock(ctx, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/LoadParallel", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Load(ctx, "a/b/load"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(st.name+"/StoreParallel", func(b *testing.B) {
			b.SetParallelism(8)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := fmt.Sprintf("p/%d", n.Add(1)%1000)
					if err := s.Store(ctx, k, value); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
