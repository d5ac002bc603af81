package routing

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines route at once while breakers open, go half-open and
// close: afterwards nothing is left in flight, no generation ever had
// more trials in flight than allowed, and every attempt is counted once.
// Run with -race.
func TestConcurrentRouting(t *testing.T) {
	const probes = 2
	cfg := Config{
		Breaker: BreakerConfig{ConsecutiveFailures: 3, OpenFor: 2 * time.Millisecond, HalfOpenProbes: probes,
			MinRequests: 10, Window: 50 * time.Millisecond},
		Cooldown: CooldownConfig{Default: time.Millisecond},
		Aliases: []AliasConfig{alias("lat", LowestLatency, 3), alias("w", Weighted, 3), alias("o", Ordered, 3),
			alias("c", LowestCost, 3)},
	}
	r, err := New(cfg, Options{Cost: func(p, _ string) (float64, bool) { return float64(p[1]), true }})
	if err != nil {
		t.Fatal(err)
	}
	failRate := map[string]float64{"p0/m": 0.6, "p1/m": 0.2, "p2/m": 0.05}

	type genKey struct {
		target string
		gen    uint32
	}
	var mu sync.Mutex
	trialsInFlight := map[genKey]int{}
	var maxTrials, reports, failures atomic.Int64

	aliases := []string{"lat", "w", "o", "c"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 3000 {
				p, _ := r.Plan(aliases[(g+i)%len(aliases)], i%2 == 0)
				for tg, ok := p.Next(); ok; tg, ok = p.Next() {
					k := genKey{tg.Key(), p.gen}
					if p.trial {
						mu.Lock()
						trialsInFlight[k]++
						if n := int64(trialsInFlight[k]); n > maxTrials.Load() {
							maxTrials.Store(n)
						}
						mu.Unlock()
					}
					var res Result
					x := rng.Float64()
					switch {
					case x < 0.02:
						res = Result{Kind: Canceled}
					case x < 0.04:
						res = rateLimit("Retry-After-Ms", "1")
					case x < 0.06:
						res.Kind = 255 // passed over: not reported below
					case rng.Float64() < failRate[tg.Key()]:
						res = Result{Kind: Reset}
					default:
						res = Result{Kind: Answered, Status: 200, Latency: time.Duration(rng.IntN(1000)) * time.Microsecond}
					}
					if p.trial {
						mu.Lock()
						trialsInFlight[k]--
						mu.Unlock()
					}
					if res.Kind == 255 {
						continue
					}
					p.Report(res)
					if res.Kind != Canceled {
						reports.Add(1)
					}
					if res.outcome() == failed {
						failures.Add(1)
					}
					if !res.Retry() {
						break
					}
				}
				p.Close()
			}
		})
	}
	// Snapshots while it runs.
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = r.Health()
				time.Sleep(time.Millisecond)
			}
		}
	})
	wg.Wait()
	close(stop)
	snaps.Wait()

	if maxTrials.Load() > probes {
		t.Fatalf("%d trials of one generation were in flight at once, more than %d", maxTrials.Load(), probes)
	}
	var requests, failed uint64
	var opens uint64
	for _, th := range r.Health().Targets {
		if th.InFlight != 0 {
			t.Errorf("%s: %d attempts still in flight", th.Target, th.InFlight)
		}
		requests += th.Requests
		failed += th.Failures
		opens += th.Opens
	}
	for _, tg := range r.list {
		if n := count(tg.h.trials.Load()); n != 0 {
			t.Errorf("%s: %d trial slots still taken", tg.key, n)
		}
	}
	if requests != uint64(reports.Load()) || failed != uint64(failures.Load()) {
		t.Fatalf("targets counted %d attempts and %d failures; %d and %d were reported", requests, failed, reports.Load(), failures.Load())
	}
	if opens == 0 {
		t.Fatal("no breaker ever opened: the test did not exercise the transitions")
	}
}
