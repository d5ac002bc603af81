package routing

import (
	"testing"
	"time"
)

// The retry budget allows Ratio of the window's requests plus
// MinPerSecond per second of window as retries; past it a plan stops
// after its first attempt, and the refusals are counted.
func TestRetryBudget(t *testing.T) {
	cfg := Config{RetryBudget: BudgetConfig{Ratio: 0.2, MinPerSecond: 0.5, Window: 10 * time.Second},
		Breaker: BreakerConfig{Off: true}, Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	r, clk := testRouter(t, cfg)
	// 100 requests that all succeed at once: no retries spent.
	for range 100 {
		attempt(t, r, "a", always(ok200))
	}
	// Now every request fails on the primary. The budget: 0.2 × requests
	// + 5 (0.5/s over 10s). The k-th failing request may retry while
	// k ≤ 0.2(100+k) + 5, i.e. up to k = 31; from then on one request in
	// five: after 60, 0.2 × 160 + 5 = 37 retries.
	var retried []int
	for k := 1; k <= 60; k++ {
		tried, stop := attempt(t, r, "a", failing(fail500, "p0/m"))
		switch {
		case len(tried) == 2:
			retried = append(retried, k)
		case stop != BudgetSpent:
			t.Fatalf("one attempt, stop %s", stop)
		}
	}
	if len(retried) != 37 || retried[30] != 31 || retried[31] != 35 {
		t.Fatalf("requests retried %v: want 1 to 31, then 35, 40, …, 60", retried)
	}
	b := r.Health().Aliases[0].RetryBudget
	if b.Exhausted != 23 || b.Requests != 160 || b.Retries != 37 || b.Allowed != 37 {
		t.Fatalf("budget %+v, want 23 refused, 160 requests, 37 retries of 37 allowed", b)
	}
	// A window later the budget is back.
	clk.Advance(10 * time.Second)
	if tried, _ := attempt(t, r, "a", failing(fail500, "p0/m")); len(tried) != 2 {
		t.Fatalf("after the window, tried %v", tried)
	}
}

// A quiet alias still retries, up to the floor.
func TestRetryBudgetFloor(t *testing.T) {
	cfg := Config{RetryBudget: BudgetConfig{MinPerSecond: 0.3, Window: 10 * time.Second},
		Breaker: BreakerConfig{Off: true}, Aliases: []AliasConfig{alias("a", Ordered, 3)}}
	r, _ := testRouter(t, cfg)
	// One request, three targets failing: 0.2 × 1 + 3 = 3.2 retries allowed.
	tried, _ := attempt(t, r, "a", always(fail500))
	if len(tried) != 3 {
		t.Fatalf("tried %v, want all three (floor 3)", tried)
	}
	tried, stop := attempt(t, r, "a", always(fail500))
	// Requests 2: allowed 3.4; 2 retries spent: one more, then none.
	if len(tried) != 2 || stop != BudgetSpent {
		t.Fatalf("second request tried %v, stop %s; want two, then the budget spent", tried, stop)
	}
}

func TestRetryBudgetOff(t *testing.T) {
	cfg := Config{RetryBudget: BudgetConfig{Off: true}, Breaker: BreakerConfig{Off: true},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	r, _ := testRouter(t, cfg)
	for range 500 {
		if tried, _ := attempt(t, r, "a", always(fail500)); len(tried) != 2 {
			t.Fatalf("with the budget off, tried %v", tried)
		}
	}
	if b := r.Health().Aliases[0].RetryBudget; !b.Off || b.Exhausted != 0 {
		t.Fatalf("budget %+v", b)
	}
}

// A target passed over without an attempt is no retry.
func TestPassingOverIsNoRetry(t *testing.T) {
	cfg := Config{RetryBudget: BudgetConfig{MinPerSecond: 0.1, Ratio: 0.01, Window: 10 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 3)}}
	r, _ := testRouter(t, cfg)
	for range 20 {
		p, _ := r.Plan("a", false)
		p.Next() // p0: passed over (say, it does not serve the endpoint)
		p.Next() // p1: passed over
		tg, ok := p.Next()
		if !ok || tg.Key() != "p2/m" {
			t.Fatalf("offered %v %v", tg, ok)
		}
		p.Report(ok200)
		p.Close()
	}
	if b := r.Health().Aliases[0].RetryBudget; b.Retries != 0 || b.Exhausted != 0 {
		t.Fatalf("budget %+v: passing over counted as retries", b)
	}
}
