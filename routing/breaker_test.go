package routing

import (
	"slices"
	"testing"
	"time"
)

// A dead primary opens after ConsecutiveFailures failures; from then on
// requests go straight to the secondary without an attempt at the
// primary.
func TestBreakerOpensOnConsecutiveFailuresAndSkips(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 2)}})
	dead := failing(refused, "p0/m")
	for i := range DefaultConsecutiveFailures {
		tried, _ := attempt(t, r, "a", dead)
		if !slices.Equal(tried, []string{"p0/m", "p1/m"}) {
			t.Fatalf("request %d tried %v, want the primary then the secondary", i, tried)
		}
		want := Closed
		if i == DefaultConsecutiveFailures-1 {
			want = Open
		}
		if got := healthOf(r, "p0/m").State; got != want {
			t.Fatalf("after %d failures the breaker is %s, want %s", i+1, got, want)
		}
	}
	for range 10 {
		if tried, _ := attempt(t, r, "a", dead); !slices.Equal(tried, []string{"p1/m"}) {
			t.Fatalf("with the primary open, tried %v, want only the secondary", tried)
		}
	}
	if got := healthOf(r, "p0/m").Requests; got != DefaultConsecutiveFailures {
		t.Fatalf("the open primary got %d attempts, want %d", got, DefaultConsecutiveFailures)
	}
}

// A success between failures starts the count again; 429s and the
// client's 4xx are not failures of the target.
func TestBreakerCountsOnlyFailuresInARow(t *testing.T) {
	r, _ := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 1)}})
	results := []Result{fail500, fail500, fail500, fail500, ok200,
		fail500, fail500, {Kind: Answered, Status: 400}, rateLimit("Retry-After", "0"), fail500, fail500,
		{Kind: Answered, Status: 404}, {Kind: Canceled}, fail500}
	for i, res := range results {
		if tried, _ := attempt(t, r, "a", always(res)); len(tried) != 1 {
			t.Fatalf("request %d: tried %v", i, tried)
		}
	}
	h := healthOf(r, "p0/m")
	if h.State != Closed {
		t.Fatalf("breaker %s after no five failures in a row (the 400 and 404 are successes)", h.State)
	}
	// 400 resets the count: 500 500 after it, then 429 (no change), 500
	// 500, then a 404 resets again, then one more.
	if h.ConsecutiveFailures != 1 {
		t.Fatalf("consecutive failures %d, want 1", h.ConsecutiveFailures)
	}
	for range 4 {
		attempt(t, r, "a", always(Result{Kind: TimedOut}))
	}
	if got := healthOf(r, "p0/m").State; got != Open {
		t.Fatalf("breaker %s after five timeouts in a row, want open", got)
	}
}

// Every kind of failure counts: refused, timed out, reset, stalled,
// malformed, 408 and each 5xx (Anthropic's 529 too).
func TestBreakerFailureKinds(t *testing.T) {
	for _, res := range []Result{
		{Kind: Refused}, {Kind: TimedOut}, {Kind: Reset}, {Kind: Stalled}, {Kind: Malformed},
		{Kind: Answered, Status: 408}, {Kind: Answered, Status: 500}, {Kind: Answered, Status: 502},
		{Kind: Answered, Status: 503}, {Kind: Answered, Status: 504}, {Kind: Answered, Status: 529},
	} {
		r, _ := testRouter(t, Config{Breaker: BreakerConfig{ConsecutiveFailures: 2}, Aliases: []AliasConfig{alias("a", Ordered, 1)}})
		attempt(t, r, "a", always(res))
		attempt(t, r, "a", always(res))
		if got := healthOf(r, "p0/m").State; got != Open {
			t.Errorf("%s %d: breaker %s after two, want open", res.Kind, res.Status, got)
		}
	}
	for _, res := range []Result{
		{Kind: Answered, Status: 200}, {Kind: Answered, Status: 400}, {Kind: Answered, Status: 401},
		{Kind: Answered, Status: 404}, {Kind: Answered, Status: 429}, {Kind: Canceled},
	} {
		r, _ := testRouter(t, Config{Breaker: BreakerConfig{ConsecutiveFailures: 1}, Aliases: []AliasConfig{alias("a", Ordered, 1)}})
		attempt(t, r, "a", always(res))
		if got := healthOf(r, "p0/m").State; got != Closed {
			t.Errorf("%s %d: breaker %s, want closed (not a failure of the target)", res.Kind, res.Status, got)
		}
	}
}

// An error rate at the threshold over MinRequests opens the breaker, even
// without failures in a row; fewer requests, or a rate below, do not.
func TestBreakerErrorRate(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ErrorRate: 0.5, MinRequests: 10, Window: 10 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	r, clk := testRouter(t, cfg)
	// fail, ok, fail, ok… : never two in a row. Nine requests: below
	// MinRequests.
	for i := range 9 {
		res := ok200
		if i%2 == 0 {
			res = fail500
		}
		attempt(t, r, "a", always(res))
		clk.Advance(100 * time.Millisecond)
	}
	if h := healthOf(r, "p0/m"); h.State != Closed || h.WindowRequests != 9 || h.WindowFailures != 5 {
		t.Fatalf("after 9 requests: %+v, want closed with 9 requests, 5 failures", h)
	}
	attempt(t, r, "a", always(ok200)) // 10 requests, 5 failures: 50%
	if got := healthOf(r, "p0/m").State; got != Closed {
		t.Fatalf("breaker %s: a success does not open it", got)
	}
	attempt(t, r, "a", always(fail500)) // 11 requests, 6 failures
	if got := healthOf(r, "p0/m").State; got != Open {
		t.Fatalf("breaker %s at 6 failures of 11 (above 50%%), want open", got)
	}

	// Below the rate: 3 failures in 10 never open it.
	r, clk = testRouter(t, cfg)
	for i := range 40 {
		res := ok200
		if i%10 < 3 && i%10 != 1 || i%10 == 5 {
			res = fail500
		}
		attempt(t, r, "a", always(res))
		clk.Advance(100 * time.Millisecond)
	}
	if h := healthOf(r, "p0/m"); h.State != Closed {
		t.Fatalf("breaker %s at a 30%% error rate, want closed (%+v)", h.State, h)
	}
}

// The window forgets: failures older than the window do not count.
func TestBreakerWindowForgets(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ErrorRate: 0.5, MinRequests: 4, Window: 10 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	r, clk := testRouter(t, cfg)
	attempt(t, r, "a", always(fail500))
	attempt(t, r, "a", always(ok200))
	attempt(t, r, "a", always(fail500))
	attempt(t, r, "a", always(ok200))
	clk.Advance(11 * time.Second)
	if h := healthOf(r, "p0/m"); h.WindowRequests != 0 || h.WindowFailures != 0 {
		t.Fatalf("after the window passed: %d requests, %d failures in it, want none", h.WindowRequests, h.WindowFailures)
	}
	attempt(t, r, "a", always(fail500))
	attempt(t, r, "a", always(ok200))
	attempt(t, r, "a", always(ok200))
	if got := healthOf(r, "p0/m").State; got != Closed {
		t.Fatalf("breaker %s: old failures counted", got)
	}
}

// An open breaker lets trials through after OpenFor, at most
// HalfOpenProbes at once; as many successes close it.
func TestBreakerHalfOpenTrials(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: 10 * time.Second, HalfOpenProbes: 2},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	r, clk := testRouter(t, cfg)
	attempt(t, r, "a", failing(fail500, "p0/m"))
	if got := healthOf(r, "p0/m").State; got != Open {
		t.Fatalf("breaker %s, want open", got)
	}
	clk.Advance(9 * time.Second)
	if tried, _ := attempt(t, r, "a", always(ok200)); !slices.Equal(tried, []string{"p1/m"}) {
		t.Fatalf("before OpenFor passed, tried %v, want only the secondary", tried)
	}
	clk.Advance(time.Second)

	// Three plans at once: two get the primary as a trial, the third
	// the secondary.
	plans := make([]Plan, 3)
	var got []string
	for i := range plans {
		plans[i], _ = r.Plan("a", false)
		tg, ok := plans[i].Next()
		if !ok {
			t.Fatalf("plan %d offered nothing", i)
		}
		got = append(got, tg.Key())
	}
	if !slices.Equal(got, []string{"p0/m", "p0/m", "p1/m"}) {
		t.Fatalf("three plans at once were offered %v, want two trials of the primary and the secondary", got)
	}
	if h := healthOf(r, "p0/m"); h.State != HalfOpen || h.Available {
		t.Fatalf("with its trials taken the primary is %s, available %v; want half_open, not available", h.State, h.Available)
	}
	plans[0].Report(ok200)
	if got := healthOf(r, "p0/m").State; got != HalfOpen {
		t.Fatalf("after one of two trials succeeded the breaker is %s, want half_open", got)
	}
	plans[1].Report(ok200)
	plans[2].Report(ok200)
	for i := range plans {
		plans[i].Close()
	}
	if got := healthOf(r, "p0/m").State; got != Closed {
		t.Fatalf("after both trials succeeded the breaker is %s, want closed", got)
	}
	if tried, _ := attempt(t, r, "a", always(ok200)); !slices.Equal(tried, []string{"p0/m"}) {
		t.Fatalf("closed again, tried %v, want the primary", tried)
	}
}

// A failed trial opens the breaker again, for twice as long each time, up
// to MaxOpenFor; a close starts from OpenFor again.
func TestBreakerTrialFailureReopensLonger(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: 10 * time.Second, MaxOpenFor: 35 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	r, clk := testRouter(t, cfg)
	attempt(t, r, "a", always(fail500))
	for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second} {
		h := healthOf(r, "p0/m")
		if h.State != Open || h.OpenUntil.Sub(clk.Now()) != want {
			t.Fatalf("breaker %s until %v from now, want open for %v", h.State, h.OpenUntil.Sub(clk.Now()), want)
		}
		if tried, stop := attempt(t, r, "a", always(fail500)); len(tried) != 0 || stop != Unavailable {
			t.Fatalf("open: tried %v, stop %s; want nothing tried, unavailable", tried, stop)
		}
		clk.Advance(want)
		if tried, _ := attempt(t, r, "a", always(fail500)); len(tried) != 1 {
			t.Fatalf("after %v: tried %v, want one trial", want, tried)
		}
	}
	clk.Advance(35 * time.Second)
	attempt(t, r, "a", always(ok200))
	if got := healthOf(r, "p0/m").State; got != Closed {
		t.Fatalf("breaker %s after a successful trial", got)
	}
	attempt(t, r, "a", always(fail500))
	if h := healthOf(r, "p0/m"); h.OpenUntil.Sub(clk.Now()) != 10*time.Second {
		t.Fatalf("after a close, opened for %v, want OpenFor again", h.OpenUntil.Sub(clk.Now()))
	}
}

// A trial offered and not tried (passed over, closed, canceled) frees its
// slot; a trial lost by the host is written off after OpenFor.
func TestBreakerTrialSlotsComeBack(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: 10 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	r, clk := testRouter(t, cfg)
	attempt(t, r, "a", failing(fail500, "p0/m"))
	clk.Advance(10 * time.Second)

	next := func() string {
		p, _ := r.Plan("a", false)
		defer p.Close()
		tg, _ := p.Next()
		return tg.Key()
	}
	// Passed over by Close, three times: the slot comes back each time.
	for i := range 3 {
		if got := next(); got != "p0/m" {
			t.Fatalf("round %d: offered %s, want the trial of the primary", i, got)
		}
	}
	// Passed over by asking for the next target.
	p, _ := r.Plan("a", false)
	tg, _ := p.Next()
	tg2, _ := p.Next()
	if tg.Key() != "p0/m" || tg2.Key() != "p1/m" {
		t.Fatalf("offered %s then %s", tg.Key(), tg2.Key())
	}
	if got := next(); got != "p0/m" {
		t.Fatalf("after a trial was passed over, offered %s, want the primary's trial again", got)
	}
	p.Report(ok200)
	p.Close()
	// Canceled: the slot comes back, the breaker stays half-open.
	attempt(t, r, "a", failing(Result{Kind: Canceled}, "p0/m"))
	if h := healthOf(r, "p0/m"); h.State != HalfOpen || !h.Available {
		t.Fatalf("after a canceled trial: %s, available %v", h.State, h.Available)
	}

	// Lost: taken and never reported nor closed.
	lost, _ := r.Plan("a", false)
	if tg, _ := lost.Next(); tg.Key() != "p0/m" {
		t.Fatalf("offered %s", tg.Key())
	}
	if got := next(); got != "p1/m" {
		t.Fatalf("with the trial held, offered %s, want the secondary", got)
	}
	clk.Advance(10 * time.Second)
	held, _ := r.Plan("a", false)
	defer held.Close()
	if tg, _ := held.Next(); tg.Key() != "p0/m" {
		t.Fatalf("after OpenFor the lost trial should be written off; offered %s", tg.Key())
	}
	// The lost trial's late report counts for nothing: it neither closes
	// the breaker nor frees the slot of the trial that replaced it.
	lost.Report(ok200)
	if got := healthOf(r, "p0/m").State; got != HalfOpen {
		t.Fatalf("a written-off trial's success changed the breaker to %s", got)
	}
	if got := next(); got != "p1/m" {
		t.Fatalf("a written-off trial's report freed the new trial's slot: offered %s", got)
	}
}

// A stream is reported once, when it ends: one that broke after its
// first byte is a failure, not a success followed by a failure.
func TestStreamBrokenAfterFirstByteFails(t *testing.T) {
	r, _ := testRouter(t, Config{Breaker: BreakerConfig{ConsecutiveFailures: 2}, Aliases: []AliasConfig{alias("a", Ordered, 1)}})
	for _, k := range []Kind{Reset, Stalled} {
		p, _ := r.Plan("a", true)
		p.Next()
		p.Report(Result{Kind: k, Status: 200, TTFB: 50 * time.Millisecond})
		p.Close()
	}
	if h := healthOf(r, "p0/m"); h.State != Open || h.Failures != 2 || h.Requests != 2 || h.TTFBMS != 0 {
		t.Fatalf("after two streams broke: %+v, want open, 2 attempts, 2 failures, no latency averaged", h)
	}
}

// With the breakers off, failing targets stay in rotation.
func TestBreakerOff(t *testing.T) {
	r, _ := testRouter(t, Config{Breaker: BreakerConfig{Off: true}, RetryBudget: BudgetConfig{Off: true},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}})
	for range 50 {
		if tried, _ := attempt(t, r, "a", failing(refused, "p0/m")); len(tried) != 2 {
			t.Fatalf("with breakers off, tried %v", tried)
		}
	}
}

// Every target out of rotation: nothing is tried, and the plan says when
// the first comes back.
func TestAllOutSaysWhen(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: 30 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	r, clk := testRouter(t, cfg)
	attempt(t, r, "a", failing(fail500, "p0/m"))
	clk.Advance(5 * time.Second)
	attempt(t, r, "a", always(rateLimit("Retry-After", "60")))
	p, _ := r.Plan("a", false)
	defer p.Close()
	if tg, ok := p.Next(); ok {
		t.Fatalf("offered %s with every target out", tg.Key())
	}
	if p.Stop() != Unavailable || p.RetryAfter() != 25*time.Second || p.Attempts() != 0 {
		t.Fatalf("stop %s, retry after %v, attempts %d; want unavailable, 25s (the primary's trial), 0",
			p.Stop(), p.RetryAfter(), p.Attempts())
	}
}
