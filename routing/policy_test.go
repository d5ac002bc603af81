package routing

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/modelgate/modelgate/pricing"
)

// first returns the target a new plan offers first (and closes it).
func first(t testing.TB, r *Router, name string, stream bool) string {
	t.Helper()
	p, ok := r.Plan(name, stream)
	if !ok {
		t.Fatalf("no alias %s", name)
	}
	defer p.Close()
	tg, ok := p.Next()
	if !ok {
		t.Fatalf("alias %s offered nothing (%s)", name, p.Stop())
	}
	return tg.Key()
}

func TestOrderedTriesInListedOrder(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 4)}, RetryBudget: BudgetConfig{Off: true}})
	tried, stop := attempt(t, r, "a", always(fail500))
	if !slices.Equal(tried, []string{"p0/m", "p1/m", "p2/m", "p3/m"}) || stop != Exhausted {
		t.Fatalf("tried %v, stop %s", tried, stop)
	}
}

// Weighted: over many picks each target's share is its weight's, within
// a tolerance of five standard deviations (a seeded source: the test is
// deterministic; the tolerance keeps it true for any seed).
func TestWeightedDistribution(t *testing.T) {
	a := alias("a", Weighted, 3)
	weights := []int{1, 3, 6}
	for i := range a.Targets {
		a.Targets[i].Weight = weights[i]
	}
	for _, seed := range []uint64{1, 2, 3} {
		r, _ := testRouter(t, Config{Aliases: []AliasConfig{a}}, Options{Rand: seeded(seed)})
		const n = 20000
		counts := map[string]int{}
		for range n {
			counts[first(t, r, "a", false)]++
		}
		for i, tc := range a.Targets {
			p := float64(weights[i]) / 10
			sd := math.Sqrt(n * p * (1 - p))
			if got := float64(counts[tc.Key()]); math.Abs(got-n*p) > 5*sd {
				t.Errorf("seed %d: %s picked %v times of %d, want %v ± %.0f", seed, tc.Key(), got, n, n*p, 5*sd)
			}
		}
	}
}

// Weighted: the next target of a plan is drawn from the ones not tried
// yet, by their weights, so every target gets tried once.
func TestWeightedFallsBackWithoutRepeats(t *testing.T) {
	a := alias("a", Weighted, 4)
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{a}, RetryBudget: BudgetConfig{Off: true}})
	for range 100 {
		tried, _ := attempt(t, r, "a", always(rateLimit("Retry-After", "0")))
		slices.Sort(tried)
		if !slices.Equal(tried, []string{"p0/m", "p1/m", "p2/m", "p3/m"}) {
			t.Fatalf("tried %v, want each target once", tried)
		}
	}
}

// Weighted: a target out of rotation gets none of the picks.
func TestWeightedSkipsOut(t *testing.T) {
	a := alias("a", Weighted, 2)
	a.Targets[0].Weight = 100
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{a}, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
	p, _ := r.PlanTarget("p0/m", false)
	p.Next()
	p.Report(fail500)
	p.Close()
	for range 200 {
		if got := first(t, r, "a", false); got != "p1/m" {
			t.Fatalf("picked %s, which is open", got)
		}
	}
}

// reportLatency gives target key one answer of latency d.
func reportLatency(t *testing.T, r *Router, name, key string, stream bool, d time.Duration) {
	t.Helper()
	for range 100 {
		p, _ := r.Plan(name, stream)
		tg, _ := p.Next()
		if tg.Key() == key {
			p.Report(Result{Kind: Answered, Status: 200, Latency: d, TTFB: d})
			p.Close()
			return
		}
		p.Close()
	}
	t.Fatalf("%s was never offered", key)
}

// Lowest latency: of two, the faster always wins once both have samples
// (power of two choices with two targets compares both); of several, the
// fastest gets the most requests, and the slowest none.
func TestLatencyPrefersTheFast(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("two", LowestLatency, 2)}})
	reportLatency(t, r, "two", "p0/m", false, 900*time.Millisecond)
	reportLatency(t, r, "two", "p1/m", false, 100*time.Millisecond)
	for range 100 {
		if got := first(t, r, "two", false); got != "p1/m" {
			t.Fatalf("picked %s, the slow one", got)
		}
	}

	r, _ = testRouter(t, Config{Aliases: []AliasConfig{alias("four", LowestLatency, 4)}})
	lat := map[string]time.Duration{"p0/m": 400 * time.Millisecond, "p1/m": 100 * time.Millisecond,
		"p2/m": 300 * time.Millisecond, "p3/m": 200 * time.Millisecond}
	for _, k := range []string{"p0/m", "p1/m", "p2/m", "p3/m"} {
		reportLatency(t, r, "four", k, false, lat[k])
	}
	counts := map[string]int{}
	for range 4000 {
		counts[first(t, r, "four", false)]++
	}
	// Two of four drawn: the fastest wins whenever drawn (1/2 of picks),
	// the slowest never.
	if counts["p0/m"] != 0 || counts["p1/m"] < 1800 || counts["p1/m"] <= counts["p3/m"] || counts["p3/m"] <= counts["p2/m"] {
		t.Fatalf("picks %v: want the fastest most, then by speed, the slowest never", counts)
	}
}

// Lowest latency follows the kind of request: a stream's plan compares
// times to first byte, other plans whole answers.
func TestLatencyByKind(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", LowestLatency, 2)}})
	report := func(key string, stream bool, ttfb, whole time.Duration) {
		p, _ := r.PlanTarget(key, stream)
		p.Next()
		p.Report(Result{Kind: Answered, Status: 200, TTFB: ttfb, Latency: whole})
		p.Close()
	}
	// p0 starts streaming fast and takes long to finish; p1 the other
	// way round. Streams and whole answers each keep their own average.
	report("p0/m", true, 100*time.Millisecond, 9*time.Second)
	report("p1/m", true, 800*time.Millisecond, 2*time.Second)
	report("p0/m", false, 0, 5*time.Second)
	report("p1/m", false, 0, time.Second)
	for range 50 {
		if s, n := first(t, r, "a", true), first(t, r, "a", false); s != "p0/m" || n != "p1/m" {
			t.Fatalf("stream picked %s, non-stream %s; want p0/m and p1/m", s, n)
		}
	}
	if h := healthOf(r, "p0/m"); h.TTFBMS != 100 || h.LatencyMS != 5000 {
		t.Fatalf("p0/m averages: ttfb %v ms, whole %v ms", h.TTFBMS, h.LatencyMS)
	}
}

// The latency average follows recent answers: a target that slows down
// loses the lead.
func TestLatencyAverageFollows(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", LowestLatency, 2)}, LatencySamples: 3})
	reportLatency(t, r, "a", "p0/m", false, 100*time.Millisecond)
	reportLatency(t, r, "a", "p1/m", false, 200*time.Millisecond)
	if got := first(t, r, "a", false); got != "p0/m" {
		t.Fatalf("picked %s", got)
	}
	for range 3 {
		p, _ := r.PlanTarget("p0/m", false)
		p.Next()
		p.Report(Result{Kind: Answered, Status: 200, Latency: time.Second})
		p.Close()
	}
	if got := first(t, r, "a", false); got != "p1/m" {
		t.Fatalf("after p0 slowed down to 1s, picked %s; averages %v ms, %v ms", got,
			healthOf(r, "p0/m").LatencyMS, healthOf(r, "p1/m").LatencyMS)
	}
	// Weight 2/(3+1): 100 → 550 → 775 → 887.5 ms.
	if got := healthOf(r, "p0/m").LatencyMS; math.Abs(got-887.5) > 0.01 {
		t.Fatalf("average %v ms, want 887.5", got)
	}
}

// Lowest cost: the cheapest target in rotation first, then by cost; the
// unpriced last in listed order.
func TestLowestCost(t *testing.T) {
	cost := map[string]float64{"p0/m": 3, "p2/m": 1, "p3/m": 2}
	opts := Options{Cost: func(p, m string) (float64, bool) { c, ok := cost[p+"/"+m]; return c, ok }}
	cfg := Config{Aliases: []AliasConfig{alias("a", LowestCost, 5)}, RetryBudget: BudgetConfig{Off: true},
		Breaker: BreakerConfig{ConsecutiveFailures: 1}}
	r, _ := testRouter(t, cfg, opts)
	tried, _ := attempt(t, r, "a", always(fail500))
	if want := []string{"p2/m", "p3/m", "p0/m", "p1/m", "p4/m"}; !slices.Equal(tried, want) {
		t.Fatalf("tried %v, want %v (cheapest first, the unpriced last in order)", tried, want)
	}
	// Every target is open now; close all but the cheapest.
	for _, k := range []string{"p0/m", "p1/m", "p3/m", "p4/m"} {
		r.Target(k).closeRemote()
	}
	if got := first(t, r, "a", false); got != "p3/m" {
		t.Fatalf("with the cheapest open, picked %s, want the next cheapest", got)
	}
}

// The shipped price table prices targets through the host's cost
// function: gpt-4o-mini is cheaper than gpt-4o.
func TestLowestCostFromPrices(t *testing.T) {
	prices := pricing.Default()
	costOf := func(provider, model string) (float64, bool) {
		// A request of a thousand tokens in and a thousand out.
		c, ok := prices.Cost("openai", model, pricing.Usage{PromptTokens: 1000, CompletionTokens: 1000})
		return c.Dollars(), ok
	}
	a := AliasConfig{Name: "a", Policy: LowestCost, Targets: []TargetConfig{
		{Provider: "big", Model: "gpt-4o"}, {Provider: "small", Model: "gpt-4o-mini"}, {Provider: "x", Model: "no-such-model"}}}
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{a}}, Options{Cost: costOf})
	if got := first(t, r, "a", false); got != "small/gpt-4o-mini" {
		t.Fatalf("picked %s, want the cheaper gpt-4o-mini", got)
	}
	for _, e := range r.Health().Aliases[0].Targets {
		if (e.Cost == nil) != (e.Target == "x/no-such-model") {
			t.Fatalf("%s: cost %v", e.Target, e.Cost)
		}
	}
}

// Priority groups: the next group only once every target of the group
// before is out of rotation or tried.
func TestPriorityGroups(t *testing.T) {
	a := alias("a", Weighted, 4)
	a.Targets[0].Priority, a.Targets[1].Priority = 1, 1 // the backups, listed first
	a.Targets[2].Priority, a.Targets[3].Priority = 0, 0
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{a}, Breaker: BreakerConfig{ConsecutiveFailures: 1},
		RetryBudget: BudgetConfig{Off: true}})
	for range 200 {
		if got := first(t, r, "a", false); got != "p2/m" && got != "p3/m" {
			t.Fatalf("picked %s from the backup group with the first group healthy", got)
		}
	}
	tried, _ := attempt(t, r, "a", always(rateLimit("Retry-After", "0")))
	if g0 := []string{tried[0], tried[1]}; len(tried) != 4 || !slices.Contains(g0, "p2/m") || !slices.Contains(g0, "p3/m") {
		t.Fatalf("tried %v: want both of group 0 before group 1", tried)
	}
	// Group 0 out: group 1 serves.
	r.Target("p2/m").open(r.now(), 0, ReasonConsecutiveFailures)
	if got := first(t, r, "a", false); got != "p3/m" {
		t.Fatalf("with one of group 0 open, picked %s, want the other", got)
	}
	r.Target("p3/m").open(r.now(), 0, ReasonConsecutiveFailures)
	for range 100 {
		if got := first(t, r, "a", false); got != "p0/m" && got != "p1/m" {
			t.Fatalf("with group 0 open, picked %s", got)
		}
	}
}

// A plan of one target, for requests that name it: it honours the
// target's breaker and cool-down.
func TestPlanTarget(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 2)}})
	if _, ok := r.PlanTarget("nope/m", false); ok {
		t.Fatal("a plan for a target no alias lists")
	}
	p, ok := r.PlanTarget("p1/m", false)
	if !ok {
		t.Fatal("no plan for p1/m")
	}
	tg, _ := p.Next()
	p.Report(rateLimit("Retry-After", "5"))
	if _, ok := p.Next(); ok || p.Stop() != Exhausted || tg.Key() != "p1/m" {
		t.Fatalf("offered %s, then stop %s", tg.Key(), p.Stop())
	}
	p.Close()
	p, _ = r.PlanTarget("p1/m", false)
	if _, ok := p.Next(); ok || p.Stop() != Unavailable || p.RetryAfter() != 5*time.Second {
		t.Fatalf("cooling: stop %s, retry after %v", p.Stop(), p.RetryAfter())
	}
	// The alias sees the same cool-down.
	if tried, _ := attempt(t, r, "a", failing(fail500, "p0/m")); !slices.Equal(tried, []string{"p0/m"}) {
		t.Fatalf("alias tried %v", tried)
	}
}

// Targets named by several aliases share their health.
func TestAliasesShareTargets(t *testing.T) {
	a := alias("a", Ordered, 2)
	b := AliasConfig{Name: "b", Targets: []TargetConfig{{Provider: "p1", Model: "m"}, {Provider: "p0", Model: "m"}}}
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{a, b}, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
	attempt(t, r, "a", failing(refused, "p0/m"))
	if tried, _ := attempt(t, r, "b", failing(refused, "p1/m")); !slices.Equal(tried, []string{"p1/m"}) {
		t.Fatalf("b tried %v: p0/m is open from a's request", tried)
	}
}

func TestUnknownAliasAndZeroPlan(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 1)}})
	p, ok := r.Plan("b", false)
	if ok {
		t.Fatal("a plan for an unknown alias")
	}
	if _, ok := p.Next(); ok {
		t.Fatal("the zero plan offered a target")
	}
	p.Report(ok200)
	p.Close()
	if r.Alias("a") == nil || r.Alias("a").Name() != "a" || len(r.Alias("a").Targets()) != 1 || r.Alias("b") != nil {
		t.Fatal("Alias lookups")
	}
}
