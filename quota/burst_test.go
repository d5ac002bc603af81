package quota_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
)

// A burst of concurrent requests at a nearly spent budget, from several
// instances: the budget is overshot by at most the under-estimates of the
// requests in flight at the last admission, and every request is counted
// exactly once.
func TestBudgetBurst(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		const instances = 3
		ss := open(t, instances)
		sp := &spender{spent: map[string]pricing.Money{"key:all-in-flight": 90 * pricing.Cent, "key:interleaved": 90 * pricing.Cent}}
		qs := make([]*quota.Quota, instances)
		for i := range qs {
			qs[i] = newQuota(t, ss[i], sp, nil, 0)
		}
		budget := dollar

		// Every request is admitted (or refused) before any is done: the
		// ten that fit in the $0.10 left are all in flight at the last
		// admission, and each costs up to 20% more than its estimate.
		t.Run("all in flight", func(t *testing.T) {
			s := quota.Subjects{Key: withBudget(key("all-in-flight"), budget, quota.Total)}
			const n = 120
			var (
				wg       sync.WaitGroup
				gate     = make(chan struct{})
				admitted = make([]*quota.Admission, n)
				refused  atomic.Int64
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					adm, ref, err := qs[i%instances].Admit(bg, s, quota.Ask{EstimatedCost: pricing.Cent})
					switch {
					case err != nil:
						t.Error(err)
					case ref != nil:
						if ref.Limit != quota.LimitBudget {
							t.Errorf("refused by %v", ref.Limit)
						}
						refused.Add(1)
					default:
						admitted[i] = adm
					}
				}()
			}
			close(gate)
			wg.Wait()
			var count int
			var actual, under pricing.Money
			for i, adm := range admitted {
				if adm == nil {
					continue
				}
				count++
				cost := pricing.Cent + pricing.Money(i%5)*pricing.Cent/20 // up to +20%
				actual += cost
				under += cost - pricing.Cent
				done(t, adm, quota.Actual{Cost: cost, Priced: true})
			}
			if count != 10 || refused.Load() != n-10 {
				t.Fatalf("%d admitted, %d refused: want exactly the 10 that fit", count, refused.Load())
			}
			b := status(t, qs[0], s).Key.Budget
			if b.Spent != 90*pricing.Cent+actual || b.Reserved != 0 {
				t.Fatalf("spent %v, reserved %v: want %v spent, each request once", b.Spent, b.Reserved, 90*pricing.Cent+actual)
			}
			if over := b.Spent - budget; over > under {
				t.Fatalf("overshoot %v is beyond the bound %v", over, under)
			}
		})

		// Requests are admitted and done at random, some over their
		// estimate and some under: the overshoot stays within the sum
		// of the under-estimates, and the spend is exactly the sum of
		// what the admitted requests cost.
		t.Run("interleaved", func(t *testing.T) {
			s := quota.Subjects{Key: withBudget(key("interleaved"), budget, quota.Total)}
			const n = 200
			var (
				wg                     sync.WaitGroup
				gate                   = make(chan struct{})
				mu                     sync.Mutex
				actual, under          pricing.Money
				admittedN, refusedN    int
				estimatesOfTheRefused  pricing.Money
				largestUnderestimation pricing.Money
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					est := pricing.Cent/2 + pricing.Money(i%11)*pricing.Cent/10 // $0.005 to $0.015
					adm, ref, err := qs[i%instances].Admit(bg, s, quota.Ask{EstimatedCost: est})
					if err != nil {
						t.Error(err)
						return
					}
					if ref != nil {
						mu.Lock()
						refusedN++
						estimatesOfTheRefused += est
						mu.Unlock()
						return
					}
					time.Sleep(time.Duration(i%3) * time.Millisecond)
					cost := est * pricing.Money(80+i%51) / 100 // 80% to 130% of the estimate
					if err := adm.Done(bg, quota.Actual{Cost: cost, Priced: true}); err != nil {
						t.Error(err)
					}
					mu.Lock()
					admittedN++
					actual += cost
					if cost > est {
						under += cost - est
						largestUnderestimation = max(largestUnderestimation, cost-est)
					}
					mu.Unlock()
				}()
			}
			close(gate)
			wg.Wait()
			b := status(t, qs[1], s).Key.Budget
			if b.Spent != 90*pricing.Cent+actual || b.Reserved != 0 {
				t.Fatalf("spent %v, reserved %v: want %v spent, each admitted request once", b.Spent, b.Reserved, 90*pricing.Cent+actual)
			}
			if over := b.Spent - budget; over > under {
				t.Fatalf("overshoot %v is beyond the bound %v", over, under)
			}
			if refusedN == 0 || admittedN < 7 {
				t.Fatalf("%d admitted, %d refused: the budget did not bind", admittedN, refusedN)
			}
			t.Logf("%d admitted, %d refused; spent %v of %v; under-estimates %v", admittedN, refusedN, b.Spent, budget, under)
		})
	})
}

// roundTrips counts the commands and pipelines a go-redis client sends:
// its round trips to Redis.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// fullSubjects has every limit and budget on the key and on its owner.
func fullSubjects(keyID string) quota.Subjects {
	l := quota.Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, Concurrent: 1 << 20}
	return quota.Subjects{
		Key:   withBudget(withLimits(key(keyID), l), 1_000_000*dollar, quota.Day),
		Owner: withBudget(withLimits(key("team"), l), 1_000_000*dollar, quota.Month),
	}
}

// On Redis a request costs two round trips, whatever its limits: one
// script to admit it against every limit of its key and owner, one to
// settle it. A refusal costs one. Seeding a budget counter costs one more,
// once.
func TestRedisRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rt := &roundTrips{}
	q := newQuota(t, onRedis(srv, rt)(t, 1)[0], &spender{}, nil, 0)
	s := fullSubjects("k")
	ask := quota.Ask{Rate: true, EstimatedTokens: 1000, EstimatedCost: pricing.Cent}
	trips := func(f func()) int64 {
		before := rt.n.Load()
		f()
		return rt.n.Load() - before
	}
	// The first request loads the script and seeds both budget counters.
	n := trips(func() {
		adm, _ := admit(t, q, s, ask)
		done(t, adm, quota.Actual{Tokens: 900, Cost: pricing.Cent, Priced: true})
	})
	t.Logf("first request: %d round trips (script load and budget seeding)", n)
	for i := range 5 {
		var adm *quota.Admission
		if n := trips(func() { adm, _ = admit(t, q, s, ask) }); n != 1 {
			t.Fatalf("request %d: Admit took %d round trips, want 1", i, n)
		}
		if n := trips(func() { done(t, adm, quota.Actual{Tokens: 900, Cost: pricing.Cent, Priced: true}) }); n != 1 {
			t.Fatalf("request %d: Done took %d round trips, want 1", i, n)
		}
	}
	small := fullSubjects("k")
	small.Key.Limits.TokensPerMinute = 10
	if n := trips(func() {
		if _, ref := admit(t, q, small, ask); ref == nil {
			t.Fatal("admitted")
		}
	}); n != 1 {
		t.Fatalf("a refusal took %d round trips, want 1", n)
	}
}

// On a Redis Cluster a request's counters, of its key and of its owner,
// live in the owner's hash slot: one script admits it, all or nothing.
func TestRedisCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	rdb, err := redisclient.New(redisclient.Options{Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: "cl:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
	sp := &spender{spent: map[string]pricing.Money{"owner:team": 99 * pricing.Cent}}
	q := newQuota(t, st, sp, nil, 0)
	for _, id := range []string{"a", "b", "c", "d"} {
		s := fullSubjects(id)
		s.Owner.Budget = quota.Budget{Amount: dollar, Period: quota.Total}
		adm, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 10, EstimatedCost: pricing.Cent / 4})
		if ref != nil {
			t.Fatalf("key %s refused: %s", id, ref.Message())
		}
		done(t, adm, quota.Actual{Tokens: 10, Cost: pricing.Cent / 4, Priced: true})
	}
	s := fullSubjects("e")
	s.Owner.Budget = quota.Budget{Amount: dollar, Period: quota.Total}
	_, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 10, EstimatedCost: pricing.Nanodollar})
	if ref == nil || ref.Limit != quota.LimitBudget || ref.Subject != quota.KindOwner {
		t.Fatalf("refusal %+v", ref)
	}
	if st := status(t, q, s); st.Key.Requests.Remaining != st.Key.Requests.Limit || st.Owner.Budget.Spent != dollar {
		t.Fatalf("status %+v", st)
	}
}
