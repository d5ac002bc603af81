package redisstate_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/procstat"
	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
)

// BenchmarkState compares the in-process state with Redis (appendfsync
// everysec) on what a request pays: a counter increment, a budget
// reservation, a sliding-window rate take, a lease renewal, and the time
// from Publish on one instance to receipt on another.
func BenchmarkState(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	newRedis := func() state.State {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}})
		if err != nil {
			b.Fatal(err)
		}
		s, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: "bench:"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
		return s
	}
	local := state.NewLocal()
	b.Cleanup(func() { _ = local.Close() })
	impls := []struct {
		name string
		a, b state.State // two instances
	}{
		{"local", local, local},
		{"redis", newRedis(), newRedis()},
	}
	ctx := context.Background()
	for _, im := range impls {
		s := im.a
		b.Run(im.name+"/Add", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Add(ctx, "k", 1, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(im.name+"/Reserve", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.Reserve(ctx, "budget", 1, 1<<62, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(im.name+"/TakeSliding", func(b *testing.B) {
			w := state.Window{Size: time.Minute, Sliding: true}
			for b.Loop() {
				if _, err := s.Take(ctx, "rpm", 1, 1<<62, w, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(im.name+"/RenewLease", func(b *testing.B) {
			l, ok, err := s.AcquireLease(ctx, "lease", "me", time.Minute)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			for b.Loop() {
				if err := s.RenewLease(ctx, "lease", l.Token, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
			_ = s.ReleaseLease(ctx, "lease", l.Token)
		})
		b.Run(im.name+"/AddParallel", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Add(ctx, "kp", 1, time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		// What a gateway under load asks of the state: 50 requests in
		// flight, each admitted by one Apply of a key's and its owner's
		// rate limits and budget. cpu-ns/op is the process's CPU per
		// Apply (every goroutine's, go-redis's included), redis-cpu-ns/op
		// redis-server's.
		b.Run(im.name+"/ApplyParallel50", func(b *testing.B) {
			ops := []state.Op{
				{Kind: state.OpTake, Name: "key-rpm", N: 1, Limit: 1 << 62, Window: state.Window{Size: time.Minute, Sliding: true}, At: time.Now()},
				{Kind: state.OpTake, Name: "key-tpm", N: 300, Limit: 1 << 62, Window: state.Window{Size: time.Minute, Sliding: true}, At: time.Now()},
				{Kind: state.OpReserve, Name: "key-held", N: 10, Limit: 1 << 62, TTL: time.Hour},
				{Kind: state.OpTake, Name: "owner-rpm", N: 1, Limit: 1 << 62, Window: state.Window{Size: time.Minute, Sliding: true}, At: time.Now()},
				{Kind: state.OpReserve, Name: "owner-held", N: 10, Limit: 1 << 62, TTL: time.Hour},
			}
			b.SetParallelism(25) // × GOMAXPROCS 2 on the CI machine
			b.ReportAllocs()
			// 0 where there is no /proc.
			procCPU := func(pid int) time.Duration { d, _ := procstat.CPU(pid); return d }
			cpu0, rcpu0 := procCPU(os.Getpid()), procCPU(srv.PID())
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				res := make([]state.Result, len(ops))
				for pb.Next() {
					if ok, err := s.Apply(ctx, "owner-1", ops, res); err != nil || !ok {
						b.Error(ok, err)
						return
					}
				}
			})
			b.ReportMetric(float64(procCPU(os.Getpid())-cpu0)/float64(b.N), "cpu-ns/op")
			if im.name == "redis" {
				b.ReportMetric(float64(procCPU(srv.PID())-rcpu0)/float64(b.N), "redis-cpu-ns/op")
			}
		})
		b.Run(im.name+"/PublishReceive", func(b *testing.B) {
			sub, err := im.b.Subscribe(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			msg := []byte(`{"deleted_key":"key_0123456789"}`)
			for b.Loop() {
				if err := s.Publish(ctx, "bench", msg); err != nil {
					b.Fatal(err)
				}
				select {
				case <-sub.Messages():
				case <-time.After(5 * time.Second):
					b.Fatal("message not received")
				}
			}
		})
	}
}
