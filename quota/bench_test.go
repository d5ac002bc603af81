package quota_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/procstat"
	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
)

// BenchmarkAdmitDone is what one request pays: admitted against requests
// and tokens per minute, a concurrency slot and a budget, of its key and
// of its owner, then settled. Redis runs with appendfsync everysec, as
// production does; roundtrips/op counts what went to Redis.
func BenchmarkAdmitDone(b *testing.B) {
	ask := quota.Ask{Rate: true, EstimatedTokens: 1000, EstimatedCost: pricing.Cent}
	actual := quota.Actual{Tokens: 800, Cost: pricing.Cent, Priced: true}
	run := func(b *testing.B, q *quota.Quota, s quota.Subjects) {
		adm, _ := admit(b, q, s, ask) // seeds the budget counters
		done(b, adm, actual)
		b.ReportAllocs()
		for b.Loop() {
			adm, ref, err := q.Admit(bg, s, ask)
			if err != nil || ref != nil {
				b.Fatal(ref, err)
			}
			if err := adm.Done(bg, actual); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("local/key+owner", func(b *testing.B) {
		run(b, newQuota(b, state.NewLocal(), &spender{}, nil, 0), fullSubjects("k"))
	})
	b.Run("local/key-budget-only", func(b *testing.B) {
		run(b, newQuota(b, state.NewLocal(), &spender{}, nil, 0),
			quota.Subjects{Key: withBudget(key("k"), 1_000_000*dollar, quota.Month)})
	})
	b.Run("local/no-limits", func(b *testing.B) {
		run(b, newQuota(b, state.NewLocal(), nil, nil, 0), quota.Subjects{Key: key("k")})
	})
	b.Run("local/key+owner/parallel", func(b *testing.B) {
		q := newQuota(b, state.NewLocal(), &spender{}, nil, 0)
		s := fullSubjects("k")
		adm, _ := admit(b, q, s, ask)
		done(b, adm, actual)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				adm, ref, err := q.Admit(bg, s, ask)
				if err != nil || ref != nil {
					b.Error(ref, err)
					return
				}
				if err := adm.Done(bg, actual); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// On Redis, 50 requests in flight at once, as a gateway under load
	// has them: one by one (two scripts a request, pipelined together,
	// with the mark a shared state's admissions carry), and leased. cpu-ns/op is this process's CPU per request (go-redis
	// and the background work of leases included), redis-cpu-ns/op
	// redis-server's, roundtrips/op the round trips to it.
	for _, leased := range []bool{false, true} {
		name := "redis/key+owner/parallel50"
		if leased {
			name += "/leased"
		}
		b.Run(name, func(b *testing.B) {
			srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
			rt := &roundTrips{}
			cfg := quota.Config{State: onRedis(srv, rt)(b, 1)[0], Spender: &spender{}, Shared: true}
			if leased {
				cfg.Lease = &quota.Leasing{}
			}
			q, err := quota.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			q.Start()
			b.Cleanup(func() { _ = q.Stop(bg) })
			s := fullSubjects("k")
			request := func() bool {
				adm, ref, err := q.Admit(bg, s, ask)
				if err != nil || ref != nil {
					b.Error(ref, err)
					return false
				}
				if err := adm.Done(bg, actual); err != nil {
					b.Error(err)
					return false
				}
				return true
			}
			// The steady state: half a second of the same load first,
			// in which leases learn the rate of use and are filled.
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && request(); {
					}
				})
			}
			wg.Wait()
			procCPU := func(pid int) time.Duration { d, _ := procstat.CPU(pid); return d }
			b.SetParallelism(25) // × GOMAXPROCS 2 on the CI machine
			b.ReportAllocs()
			cpu0, rcpu0, rt0 := procCPU(os.Getpid()), procCPU(srv.PID()), rt.n.Load()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && request() {
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(procCPU(os.Getpid())-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(procCPU(srv.PID())-rcpu0)/float64(b.N), "redis-cpu-ns/op")
			b.ReportMetric(float64(rt.n.Load()-rt0)/float64(b.N), "roundtrips/op")
		})
	}
	b.Run("redis/key+owner", func(b *testing.B) {
		srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
		rt := &roundTrips{}
		q, err := quota.New(quota.Config{State: onRedis(srv, rt)(b, 1)[0], Spender: &spender{}, Shared: true})
		if err != nil {
			b.Fatal(err)
		}
		s := fullSubjects("k")
		adm, _ := admit(b, q, s, ask)
		done(b, adm, actual)
		before := rt.n.Load()
		b.ReportAllocs()
		for b.Loop() {
			adm, ref, err := q.Admit(bg, s, ask)
			if err != nil || ref != nil {
				b.Fatal(ref, err)
			}
			if err := adm.Done(bg, actual); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rt.n.Load()-before)/float64(b.N), "roundtrips/op")
	})
}
