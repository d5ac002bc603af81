package quota_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
)

// The tests of leases (lease.go): instances are Quotas on one state, each
// with its own leases, as the instances of a cluster on one Redis.

// leaseBase is where the lease tests' clocks start: 5 s into a minute,
// so that a test (under 50 s) counts in one fixed window of the rate
// limits, whose previous window is empty.
var leaseBase = time.Date(2031, 5, 6, 7, 8, 5, 0, time.UTC)

// leaseClock runs from leaseBase at the speed of the real clock.
func leaseClock() func() time.Time {
	start := time.Now()
	return func() time.Time { return leaseBase.Add(time.Since(start)) }
}

// countingState counts Applies, and fails them as told: all of them while
// down, or, for lose > 0, the next lose fenced Applies (the background
// settlements of leases) after applying them, as when Redis took a
// command and its answer was lost.
type countingState struct {
	state.State
	applies atomic.Int64
	exact   atomic.Int64  // of them, not the leases' background batches: requests counted one by one
	delay   time.Duration // of every Apply: a round trip on a network
	down    atomic.Bool
	lose    atomic.Int64
	lost    atomic.Int64
}

func (c *countingState) Apply(ctx context.Context, scope string, ops []state.Op, res []state.Result) (bool, error) {
	c.applies.Add(1)
	if len(ops) > 0 && ops[0].Kind != state.OpAdvance {
		c.exact.Add(1)
	}
	time.Sleep(c.delay)
	if c.down.Load() {
		return false, fmt.Errorf("%w: down", state.ErrUnavailable)
	}
	ok, err := c.State.Apply(ctx, scope, ops, res)
	if err == nil && len(ops) > 0 && ops[0].Kind == state.OpAdvance && c.lose.Add(-1) >= 0 {
		c.lost.Add(1)
		return false, fmt.Errorf("%w: the answer was lost", state.ErrUnavailable)
	}
	return ok, err
}

// leasedQuotas returns n Quotas leasing on the states sts (one each, or
// the first for all), started, stopped at the end.
func leasedQuotas(t testing.TB, sts []state.State, n int, c quota.Leasing) []*quota.Quota {
	t.Helper()
	now := leaseClock()
	qs := make([]*quota.Quota, n)
	for i := range qs {
		st := sts[min(i, len(sts)-1)]
		q, err := quota.New(quota.Config{State: st, Now: now, Lease: &c})
		if err != nil {
			t.Fatal(err)
		}
		q.Start()
		t.Cleanup(func() { _ = q.Stop(bg) })
		qs[i] = q
	}
	return qs
}

// fastLeasing is quick background work for tests.
var fastLeasing = quota.Leasing{Life: time.Second, Interval: 10 * time.Millisecond, Horizon: 100 * time.Millisecond, Idle: 300 * time.Millisecond}

// load sends requests of s from workers goroutines per Quota, each ask
// settled with the actual after hold, until stop is closed; it counts
// what was admitted, refused and in flight at most at once.
type load struct {
	admitted, refused, errors atomic.Int64
	inflight, peak            atomic.Int64
	tokens                    atomic.Int64 // the actual tokens of the admitted
	cost                      atomic.Int64 // their cost
}

func (l *load) run(t testing.TB, qs []*quota.Quota, workers int, s quota.Subjects, ask quota.Ask, actual quota.Actual,
	hold, pause time.Duration, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for _, q := range qs {
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					adm, ref, err := q.Admit(bg, s, ask)
					switch {
					case err != nil:
						l.errors.Add(1)
					case ref != nil:
						l.refused.Add(1)
					default:
						l.admitted.Add(1)
						n := l.inflight.Add(1)
						for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
						}
						time.Sleep(hold)
						l.inflight.Add(-1)
						l.tokens.Add(actual.Tokens)
						l.cost.Add(int64(actual.Cost))
						if err := adm.Done(bg, actual); err != nil {
							l.errors.Add(1)
						}
					}
					time.Sleep(pause)
				}
			})
		}
	}
	wg.Wait()
}

// reader is a Quota that reads the state at the lease tests' time,
// counting the lease buckets of budgets as reserved.
func reader(t testing.TB, st state.State) *quota.Quota {
	t.Helper()
	q, err := quota.New(quota.Config{State: st, Now: leaseClock(), Lease: &fastLeasing})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func leaseSubjects(limits quota.Limits, budget quota.Budget) quota.Subjects {
	return quota.Subjects{Key: quota.Subject{ID: "key_lease", Name: "k", Limits: limits, Budget: budget}}
}

// TestLeasesSaveRoundTrips: with large limits, a steady load is admitted
// and settled with a round trip to the state for a small share of its
// requests, and once every instance has stopped, the state counts exactly
// what was admitted: every request, every actual token, every cost, no
// slot, nothing reserved.
func TestLeasesSaveRoundTrips(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		sts := open(t, 2)
		counting := []state.State{&countingState{State: sts[0]}, &countingState{State: sts[1]}}
		qs := leasedQuotas(t, counting, 2, fastLeasing)
		s := leaseSubjects(quota.Limits{RequestsPerMinute: 1e6, TokensPerMinute: 1e9, Concurrent: 10_000},
			quota.Budget{Amount: 1000 * dollar, Period: quota.Month})
		s.Owner = quota.Subject{ID: "team", Limits: quota.Limits{RequestsPerMinute: 1e6}, Budget: quota.Budget{Amount: 1000 * dollar, Period: quota.Day}}
		ask := quota.Ask{EstimatedTokens: 500, EstimatedCost: 5000, Rate: true}
		actual := quota.Actual{Tokens: 120, Cost: 1234, Priced: true}
		var l load
		stop := make(chan struct{})
		time.AfterFunc(1500*time.Millisecond, func() { close(stop) })
		l.run(t, qs, 4, s, ask, actual, time.Millisecond, 0, stop)
		applies := counting[0].(*countingState).applies.Load() + counting[1].(*countingState).applies.Load()
		n := l.admitted.Load()
		t.Logf("%d requests admitted on two instances, %d refused, %d errors; %d applies (%.3f per request)",
			n, l.refused.Load(), l.errors.Load(), applies, float64(applies)/float64(n))
		if l.refused.Load() != 0 || l.errors.Load() != 0 || n < 500 {
			t.Fatalf("admitted %d, refused %d, errors %d", n, l.refused.Load(), l.errors.Load())
		}
		if applies*10 > n {
			t.Errorf("%d applies for %d requests: leases should save nine round trips in ten", applies, n)
		}
		for _, q := range qs {
			if err := q.Stop(bg); err != nil {
				t.Fatal(err)
			}
		}
		st := status(t, reader(t, sts[0]), s)
		if got := 1e6 - st.Key.Requests.Remaining; got != n {
			t.Errorf("the key's requests-per-minute window counts %d, want %d", got, n)
		}
		if got := 1e6 - st.Owner.Requests.Remaining; got != n {
			t.Errorf("the owner's requests-per-minute window counts %d, want %d", got, n)
		}
		if got := 1e9 - st.Key.Tokens.Remaining; got != l.tokens.Load() {
			t.Errorf("the tokens-per-minute window counts %d, want %d", got, l.tokens.Load())
		}
		for _, b := range []quota.BudgetStatus{st.Key.Budget, st.Owner.Budget} {
			if b.Spent != pricing.Money(l.cost.Load()) || b.Reserved != 0 {
				t.Errorf("a budget: spent $%s, reserved $%s; want $%s, nothing reserved", b.Spent, b.Reserved, pricing.Money(l.cost.Load()))
			}
		}
	})
}

// TestLeaseBounds: three instances on one state, each sending requests of
// one key as fast as it can, under limits large enough to be leased:
// requests and tokens per minute, concurrency and a budget are never
// passed, and an instance refused saw at most (N-1) slices of the limit
// unused elsewhere (docs/limits-and-usage.md, tolerances across
// instances).
func TestLeaseBounds(t *testing.T) {
	const n = 3
	cases := []struct {
		name   string
		s      quota.Subjects
		ask    quota.Ask
		actual quota.Actual
		hold   time.Duration
		limit  int64                                 // what is never passed
		count  func(l *load) int64                   // what counts against limit
		state  func(st quota.Status, l *load) string // what the state must count after
	}{
		{
			name: "requests per minute", s: leaseSubjects(quota.Limits{RequestsPerMinute: 6400}, quota.Budget{}),
			ask: quota.Ask{EstimatedTokens: 10, Rate: true}, actual: quota.Actual{Tokens: 10, Priced: true}, limit: 6400,
			count: func(l *load) int64 { return l.admitted.Load() },
			state: func(st quota.Status, l *load) string {
				if got := 6400 - st.Key.Requests.Remaining; got != l.admitted.Load() {
					return fmt.Sprintf("the window counts %d requests, want %d", got, l.admitted.Load())
				}
				return ""
			},
		},
		{
			name: "tokens per minute", s: leaseSubjects(quota.Limits{TokensPerMinute: 640_000}, quota.Budget{}),
			ask: quota.Ask{EstimatedTokens: 100, Rate: true}, actual: quota.Actual{Tokens: 80, Priced: true}, limit: 640_000,
			count: func(l *load) int64 { return l.tokens.Load() },
			state: func(st quota.Status, l *load) string {
				if got := 640_000 - st.Key.Tokens.Remaining; got != l.tokens.Load() {
					return fmt.Sprintf("the window counts %d tokens, want %d", got, l.tokens.Load())
				}
				return ""
			},
		},
		{
			name: "budget", s: leaseSubjects(quota.Limits{}, quota.Budget{Amount: dollar, Period: quota.Day}),
			ask: quota.Ask{EstimatedTokens: 100, EstimatedCost: 100_000}, actual: quota.Actual{Tokens: 80, Cost: 80_000, Priced: true},
			limit: int64(dollar),
			count: func(l *load) int64 { return l.cost.Load() },
			state: func(st quota.Status, l *load) string {
				if b := st.Key.Budget; int64(b.Spent) != l.cost.Load() || b.Reserved != 0 {
					return fmt.Sprintf("the budget: spent $%s, reserved $%s; want $%s, nothing reserved", b.Spent, b.Reserved, pricing.Money(l.cost.Load()))
				}
				return ""
			},
		},
		{
			name: "concurrent requests", s: leaseSubjects(quota.Limits{Concurrent: 64}, quota.Budget{}),
			ask: quota.Ask{EstimatedTokens: 10, Rate: true}, actual: quota.Actual{Tokens: 10, Priced: true}, hold: 3 * time.Millisecond,
			limit: 64,
			count: func(l *load) int64 { return l.peak.Load() },
		},
	}
	bothStates(t, func(t *testing.T, open opener) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sts := open(t, n)
				counting := make([]state.State, n)
				for i := range counting {
					counting[i] = &countingState{State: sts[i]}
				}
				qs := leasedQuotas(t, counting, n, fastLeasing)
				var l load
				stop := make(chan struct{})
				// Refusals once the limit is reached: every instance's
				// slices are used up by then, as it keeps sending.
				var lowest atomic.Int64
				lowest.Store(-1)
				go func() {
					defer close(stop)
					deadline := time.Now().Add(4 * time.Second)
					for time.Now().Before(deadline) && l.refused.Load() < 300 {
						if lowest.Load() < 0 && l.refused.Load() > 0 {
							lowest.Store(tc.count(&l))
						}
						time.Sleep(time.Millisecond)
					}
				}()
				// Paced, so that instances learn their rate of use and
				// lease slices before the limit is reached.
				workers := 4
				if tc.limit == 64 {
					workers = 30
				}
				l.run(t, qs, workers, tc.s, tc.ask, tc.actual, tc.hold, time.Millisecond, stop)
				var applies int64
				for _, c := range counting {
					applies += c.(*countingState).applies.Load()
				}
				got := tc.count(&l)
				share := tc.limit / 16
				t.Logf("%d instances: admitted %d, refused %d, errors %d; %d applies; counted %d of %d (a slice: up to %d); %d when the first refusal was seen",
					n, l.admitted.Load(), l.refused.Load(), l.errors.Load(), applies, got, tc.limit, share, lowest.Load())
				if l.errors.Load() != 0 {
					t.Errorf("%d errors", l.errors.Load())
				}
				if got > tc.limit {
					t.Errorf("counted %d, over the limit of %d", got, tc.limit)
				}
				if tc.limit != 64 && (l.refused.Load() == 0 || got < tc.limit-(n-1)*share-2*tc.ask.EstimatedTokens) {
					t.Errorf("counted %d of %d with refusals: more than %d slices of %d short", got, tc.limit, n-1, share)
				}
				// A refusal is one round trip; the admitted, most of them
				// none. (Concurrency here is always at its limit: the
				// slots an instance frees go to whoever asks first, one by
				// one or in a slice.)
				if tc.limit != 64 && (applies-l.refused.Load())*4 > l.admitted.Load() {
					t.Errorf("%d applies for %d requests admitted and %d refused: the limit was not leased", applies, l.admitted.Load(), l.refused.Load())
				}
				for _, q := range qs {
					if err := q.Stop(bg); err != nil {
						t.Fatal(err)
					}
				}
				if tc.state != nil {
					if msg := tc.state(status(t, reader(t, sts[0]), tc.s), &l); msg != "" {
						t.Error(msg)
					}
				}
			})
		}
	})
}

// TestLeaseSmallLimitsExact: a limit whose share would not hold two
// requests is not leased: across three instances, a burst is admitted
// exactly up to it, each admitted request told a different number left,
// as without leasing.
func TestLeaseSmallLimitsExact(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		qs := leasedQuotas(t, open(t, 3), 3, fastLeasing)
		cases := []struct {
			name string
			s    quota.Subjects
			ask  quota.Ask
			want int
		}{
			{"requests per minute", leaseSubjects(quota.Limits{RequestsPerMinute: 20}, quota.Budget{}), quota.Ask{EstimatedTokens: 10, Rate: true}, 20},
			{"tokens per minute", leaseSubjects(quota.Limits{TokensPerMinute: 800}, quota.Budget{}), quota.Ask{EstimatedTokens: 40, Rate: true}, 20},
			{"budget", leaseSubjects(quota.Limits{}, quota.Budget{Amount: 2000, Period: quota.Day}), quota.Ask{EstimatedTokens: 10, EstimatedCost: 100}, 20},
		}
		for i, tc := range cases {
			// Of want, 10 go to the requests before the burst: they are
			// still counted (in the window, or spent from the budget).
			tc.s.Key.ID = fmt.Sprintf("key_small_%d", i)
			// Requests at a steady pace first, as a rate that would
			// lease a larger limit.
			for j := range 10 {
				adm, _ := admit(t, qs[j%3], tc.s, tc.ask)
				time.Sleep(15 * time.Millisecond)
				done(t, adm, quota.Actual{Tokens: tc.ask.EstimatedTokens, Cost: tc.ask.EstimatedCost, Priced: true})
			}
			var mu sync.Mutex
			remaining := map[int64]int{}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for j := range 3 * tc.want {
				wg.Go(func() {
					adm, ref := admit(t, qs[j%3], tc.s, tc.ask)
					if ref != nil {
						return
					}
					admitted.Add(1)
					mu.Lock()
					defer mu.Unlock()
					h := adm.Headers()
					switch {
					case h.Requests.Limit > 0:
						remaining[h.Requests.Remaining]++
					case h.Tokens.Limit > 0:
						remaining[h.Tokens.Remaining]++
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); int(got) != tc.want-10 {
				t.Errorf("%s: admitted %d of a burst, want exactly %d", tc.name, got, tc.want-10)
			}
			for r, k := range remaining {
				if k != 1 {
					t.Errorf("%s: %d admitted requests were told %d left: %v", tc.name, k, r, remaining)
				}
			}
		}
	})
}

// warm sends requests of s through q at a steady pace for d, so that q
// leases slices of its limits, and settles them.
func warm(t testing.TB, q *quota.Quota, s quota.Subjects, ask quota.Ask, actual quota.Actual, d time.Duration) int {
	t.Helper()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		adm, ref := admit(t, q, s, ask)
		if ref != nil {
			t.Fatalf("warming up: %s", ref.Message())
		}
		done(t, adm, actual)
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestLeaseKilledInstance: an instance that dies holding slices of a
// budget and of concurrency slots, with requests in flight, holds them in
// the state until they expire — a budget's within two lease lives, slots
// within one — and not after: the other instances can then use all of
// the limit.
func TestLeaseKilledInstance(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		sts := open(t, 2)
		qs := leasedQuotas(t, sts, 2, fastLeasing)
		a, b := qs[0], qs[1]
		s := leaseSubjects(quota.Limits{Concurrent: 64}, quota.Budget{Amount: dollar, Period: quota.Day})
		ask := quota.Ask{EstimatedTokens: 10, EstimatedCost: 100_000, Rate: true}
		actual := quota.Actual{Tokens: 10, Cost: 100_000, Priced: true}
		// a runs 8 requests at a time for a while, then dies with 8 in
		// flight.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { warm(t, a, s, ask, actual, 300*time.Millisecond) })
		}
		wg.Wait()
		var inflight int
		for range 8 {
			if adm := a.AdmitHeld(s, ask); adm != nil {
				inflight++
			}
		}
		if inflight == 0 {
			t.Fatal("a held no slice to admit from")
		}
		a.Kill()
		died := time.Now()
		st := status(t, reader(t, sts[1]), s)
		spent := st.Key.Budget.Spent
		t.Logf("a died with %d requests in flight; the budget: spent $%s, reserved $%s", inflight, st.Key.Budget.Spent, st.Key.Budget.Reserved)
		if st.Key.Budget.Reserved < pricing.Money(inflight)*100_000 {
			t.Errorf("a's requests in flight are not reserved: $%s", st.Key.Budget.Reserved)
		}
		// Within two lease lives (and a second for clocks apart), what a
		// held is no longer reserved, and its slots are free.
		for {
			st = status(t, reader(t, sts[1]), s)
			if st.Key.Budget.Reserved == 0 {
				break
			}
			if time.Since(died) > 2*fastLeasing.Life+1500*time.Millisecond {
				t.Fatalf("%v after a died, the budget still has $%s reserved", time.Since(died), st.Key.Budget.Reserved)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("what a held was no longer reserved %v after it died", time.Since(died).Round(10*time.Millisecond))
		if st.Key.Budget.Spent != spent {
			t.Errorf("spent $%s, $%s when a died", st.Key.Budget.Spent, spent)
		}
		// Every slot is free: an instance admitting one by one (b had
		// no requests, and holds none) takes all 64.
		one := newQuota(t, sts[1], nil, nil, 0)
		var adms []*quota.Admission
		for range 64 {
			adm, ref := admit(t, one, s, ask)
			if ref != nil {
				t.Fatalf("%d requests in flight: %s", len(adms), ref.Message())
			}
			adms = append(adms, adm)
		}
		if _, ref := admit(t, b, s, ask); ref == nil || ref.Limit != quota.LimitConcurrent {
			t.Fatalf("a 65th request in flight: %v", ref)
		}
		for _, adm := range adms {
			done(t, adm, actual)
		}
	})
}

// TestLeaseLostAnswers: background settlements that Redis applied but
// whose answers were lost (a timeout after Redis took them) are sent
// again, and counted once. A slice those batches were granted is counted
// in the state, unknown to the instance, until its window or lease bucket
// ends: never more than was asked.
func TestLeaseLostAnswers(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		sts := open(t, 2)
		c := &countingState{State: sts[0]}
		qs := leasedQuotas(t, []state.State{c, sts[1]}, 2, fastLeasing)
		s := leaseSubjects(quota.Limits{RequestsPerMinute: 1e6, TokensPerMinute: 1e9, Concurrent: 10_000},
			quota.Budget{Amount: 1000 * dollar, Period: quota.Month})
		var l load
		stop := make(chan struct{})
		// Once the instances hold slices, and their rounds settle.
		time.AfterFunc(400*time.Millisecond, func() { c.lose.Store(30) })
		time.AfterFunc(time.Second, func() { close(stop) })
		l.run(t, qs, 4, s, quota.Ask{EstimatedTokens: 500, EstimatedCost: 5000, Rate: true},
			quota.Actual{Tokens: 120, Cost: 1234, Priced: true}, time.Millisecond, 0, stop)
		for _, q := range qs {
			if err := q.Stop(bg); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d admitted; %d settlements applied and answered with an error", l.admitted.Load(), c.lost.Load())
		if c.lost.Load() == 0 || l.errors.Load() != 0 {
			t.Fatalf("lost %d answers, %d errors", c.lost.Load(), l.errors.Load())
		}
		// Windows: what was admitted, and the slices lost with answers
		// (a slice is at most 1/16 of the limit).
		lost := c.lost.Load()
		st := status(t, reader(t, sts[1]), s)
		if got, n := 1e6-st.Key.Requests.Remaining, l.admitted.Load(); got < n || got > n+lost*1e6/16 {
			t.Errorf("the requests-per-minute window counts %d, want %d and at most %d slices lost", got, n, lost)
		}
		if got, n := 1e9-st.Key.Tokens.Remaining, l.tokens.Load(); got < n || got > n+lost*1e9/16 {
			t.Errorf("the tokens-per-minute window counts %d, want %d and at most %d slices lost", got, n, lost)
		}
		// The spend: exactly what was spent. What the lease buckets
		// hold expires within two lease lives.
		if b := st.Key.Budget; b.Spent != pricing.Money(l.cost.Load()) || b.Reserved < 0 || b.Reserved > pricing.Money(lost)*1000*dollar/16 {
			t.Errorf("the budget: spent $%s, reserved $%s; want $%s, at most %d slices reserved", b.Spent, b.Reserved, pricing.Money(l.cost.Load()), lost)
		}
		time.Sleep(2*fastLeasing.Life + 1100*time.Millisecond)
		if b := status(t, reader(t, sts[1]), s).Key.Budget; b.Spent != pricing.Money(l.cost.Load()) || b.Reserved != 0 {
			t.Errorf("two lease lives later, the budget: spent $%s, reserved $%s; want $%s, nothing reserved", b.Spent, b.Reserved, pricing.Money(l.cost.Load()))
		}
	})
}

// TestLeaseStateDown: while the state cannot be reached, an instance
// admits from what it holds (AdmitHeld) and settles in memory; once the
// state is back, every settlement reaches it once.
func TestLeaseStateDown(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		sts := open(t, 1)
		c := &countingState{State: sts[0]}
		q := leasedQuotas(t, []state.State{c}, 1, quota.Leasing{Life: 5 * time.Second, Interval: 10 * time.Millisecond,
			Horizon: time.Second, Idle: 5 * time.Second})[0]
		s := leaseSubjects(quota.Limits{RequestsPerMinute: 1e6, TokensPerMinute: 1e9},
			quota.Budget{Amount: 1000 * dollar, Period: quota.Month})
		ask := quota.Ask{EstimatedTokens: 500, EstimatedCost: 5000, Rate: true}
		actual := quota.Actual{Tokens: 120, Cost: 1234, Priced: true}
		n := int64(warm(t, q, s, ask, actual, 500*time.Millisecond))
		c.down.Store(true)
		if _, _, err := q.Admit(bg, s, quota.Ask{EstimatedTokens: 1e8, EstimatedCost: 5000, Rate: true}); err == nil {
			t.Fatal("a request larger than any slice was admitted with the state down")
		}
		held := int64(0)
		for {
			adm := q.AdmitHeld(s, ask)
			if adm == nil {
				break
			}
			held++
			done(t, adm, actual)
		}
		time.Sleep(100 * time.Millisecond) // rounds fail meanwhile
		c.down.Store(false)
		if err := q.Stop(bg); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d requests before the state went down, %d admitted from what the instance held while it was", n, held)
		if held == 0 {
			t.Fatal("nothing was admitted from what the instance held")
		}
		n += held
		st := status(t, reader(t, sts[0]), s)
		if got := 1e6 - st.Key.Requests.Remaining; got != n {
			t.Errorf("the requests-per-minute window counts %d, want %d", got, n)
		}
		if got := 1e9 - st.Key.Tokens.Remaining; got != n*actual.Tokens {
			t.Errorf("the tokens-per-minute window counts %d, want %d", got, n*actual.Tokens)
		}
		if b := st.Key.Budget; b.Spent != pricing.Money(n)*actual.Cost || b.Reserved != 0 {
			t.Errorf("the budget: spent $%s, reserved $%s; want $%s, nothing reserved", b.Spent, b.Reserved, pricing.Money(n)*actual.Cost)
		}
	})
}

// TestLeaseAnswersBeyondEstimates: requests whose answers use far more
// than their estimates (a request estimated at one token that uses 40)
// take it from the slice, which is sized by what they take: they are
// still admitted and settled without round trips, and the window counts
// what they used.
func TestLeaseAnswersBeyondEstimates(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		c := &countingState{State: open(t, 1)[0]}
		q := leasedQuotas(t, []state.State{c}, 1, fastLeasing)[0]
		s := leaseSubjects(quota.Limits{TokensPerMinute: 1e9}, quota.Budget{Amount: 1000 * dollar, Period: quota.Month})
		var l load
		stop := make(chan struct{})
		time.AfterFunc(time.Second, func() { close(stop) })
		l.run(t, []*quota.Quota{q}, 8, s, quota.Ask{EstimatedTokens: 1, EstimatedCost: 100, Rate: true},
			quota.Actual{Tokens: 40, Cost: 4000, Priced: true}, time.Millisecond, 0, stop)
		applies := c.applies.Load()
		t.Logf("%d admitted, %d applies", l.admitted.Load(), applies)
		if l.errors.Load() != 0 || l.refused.Load() != 0 {
			t.Fatalf("%d errors, %d refused", l.errors.Load(), l.refused.Load())
		}
		if applies*10 > l.admitted.Load() {
			t.Errorf("%d applies for %d requests: their slices ran dry", applies, l.admitted.Load())
		}
		if err := q.Stop(bg); err != nil {
			t.Fatal(err)
		}
		st := status(t, reader(t, c.State), s)
		if got := 1e9 - st.Key.Tokens.Remaining; got != l.tokens.Load() {
			t.Errorf("the tokens-per-minute window counts %d, want %d", got, l.tokens.Load())
		}
		if b := st.Key.Budget; b.Spent != pricing.Money(l.cost.Load()) || b.Reserved != 0 {
			t.Errorf("the budget: spent $%s, reserved $%s; want $%s, nothing reserved", b.Spent, b.Reserved, pricing.Money(l.cost.Load()))
		}
	})
}

// TestLeaseBursts: clients that send again as soon as they are answered
// come together; a slice holds what came at once lately, so a burst is
// admitted from it, though the instance's rate would size a smaller one
// and a refill takes a round trip (20 ms here) to come.
func TestLeaseBursts(t *testing.T) {
	c := &countingState{State: local(t, 1)[0], delay: 20 * time.Millisecond}
	q := leasedQuotas(t, []state.State{c}, 1, quota.Leasing{Life: time.Second})[0]
	s := leaseSubjects(quota.Limits{RequestsPerMinute: 1e6, Concurrent: 10_000}, quota.Budget{Amount: 1000 * dollar, Period: quota.Month})
	ask := quota.Ask{EstimatedTokens: 10, EstimatedCost: 1000, Rate: true}
	actual := quota.Actual{Tokens: 10, Cost: 1000, Priced: true}
	const clients, rounds = 32, 10
	var exact atomic.Int64
	for r := range rounds {
		before := c.exact.Load()
		var wg sync.WaitGroup
		adms := make([]*quota.Admission, clients)
		for i := range clients {
			wg.Go(func() { adms[i], _ = admit(t, q, s, ask) })
		}
		wg.Wait()
		if r >= rounds/2 {
			exact.Add(c.exact.Load() - before)
		}
		// Answered 400 ms later, all of them: more than the 250 ms a
		// slice holds at their rate.
		time.Sleep(400 * time.Millisecond)
		for _, adm := range adms {
			wg.Go(func() { done(t, adm, actual) })
		}
		wg.Wait()
	}
	t.Logf("%d bursts of %d requests: %d of the last %d bursts' requests counted one by one", rounds, clients, exact.Load(), rounds/2)
	if exact.Load() > rounds/2 {
		t.Errorf("%d of %d bursts of %d requests counted one by one: their slices did not hold a burst", exact.Load(), rounds/2, clients)
	}
}

// TestLeaseQuiet: leases that hold nothing and are not used any more are
// left by the background work, those of a budget whose answers cost more
// than their estimates too (what they cost beyond is spent in full).
func TestLeaseQuiet(t *testing.T) {
	q := leasedQuotas(t, local(t, 1), 1, fastLeasing)[0]
	s := leaseSubjects(quota.Limits{RequestsPerMinute: 1e6, Concurrent: 1000}, quota.Budget{Amount: dollar, Period: quota.Month})
	s.Owner = quota.Subject{ID: "team-quiet", Budget: quota.Budget{Amount: dollar, Period: quota.Month}}
	ask := quota.Ask{EstimatedTokens: 10, EstimatedCost: 1000, Rate: true}
	warm(t, q, s, ask, quota.Actual{Tokens: 10, Cost: 5000, Priced: true}, 500*time.Millisecond)
	// The last answer costs far more than its slice holds, and than the
	// budget has left to cover it with.
	adm := q.AdmitHeld(s, ask)
	if adm == nil {
		t.Fatal("nothing held to admit from")
	}
	done(t, adm, quota.Actual{Tokens: 10, Cost: 10 * dollar, Priced: true})
	if n := q.ActiveLeases(); n != 2 {
		t.Fatalf("%d subjects with leases, want the key and its owner", n)
	}
	deadline := time.Now().Add(10*fastLeasing.Idle + 2*time.Second)
	for q.ActiveLeases() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subjects still visited %v after their last request", q.ActiveLeases(), 10*fastLeasing.Idle+2*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
