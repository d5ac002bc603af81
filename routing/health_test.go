package routing

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestHealthSnapshot(t *testing.T) {
	cost := func(p, m string) (float64, bool) { return 2.5, p == "p0" }
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 2, OpenFor: 30 * time.Second}, IdleTimeout: 20 * time.Second,
		Aliases: []AliasConfig{alias("b", LowestCost, 2), {Name: "a", Policy: Weighted, Targets: []TargetConfig{{Provider: "p1", Model: "m"}}}}}
	r, clk := testRouter(t, cfg, Options{Cost: cost})
	attempt(t, r, "b", failing(fail500, "p0/m"))
	attempt(t, r, "b", failing(fail500, "p0/m"))
	attempt(t, r, "a", always(rateLimit("Retry-After", "12")))
	h := r.Health()
	if len(h.Targets) != 2 || h.Targets[0].Target != "p0/m" || len(h.Aliases) != 2 || h.Aliases[0].Alias != "a" {
		t.Fatalf("snapshot order: %+v", h)
	}
	p0, p1 := h.Targets[0], h.Targets[1]
	if p0.State != Open || p0.Available || !p0.OpenUntil.Equal(clk.Now().Add(30*time.Second)) || p0.Opens != 1 ||
		p0.Requests != 2 || p0.Failures != 2 || p0.ErrorRate != 1 || p0.ConsecutiveFailures != 2 {
		t.Fatalf("p0/m: %+v", p0)
	}
	if p1.State != Closed || p1.Available || !p1.CooldownUntil.Equal(clk.Now().Add(12*time.Second)) || p1.Cooldowns != 1 ||
		p1.LatencyMS != 100 || p1.Requests != 3 || p1.Failures != 0 || p1.IdleTimeoutMS != 20000 {
		t.Fatalf("p1/m: %+v", p1)
	}
	b := h.Aliases[1]
	if b.Policy != LowestCost || *b.Targets[0].Cost != 2.5 || b.Targets[1].Cost != nil || b.RetryBudget.Requests != 2 || b.RetryBudget.Retries != 2 {
		t.Fatalf("alias b: %+v", b)
	}
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"target":"p0/m"`, `"state":"open"`, `"open_until":"2026-03-01T12:00:30Z"`,
		`"cooldown_until":"2026-03-01T12:00:12Z"`, `"policy":"cost"`, `"retry_budget":{`, `"idle_timeout_ms":20000`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s: %s", want, js)
		}
	}
	if strings.Contains(string(js), `"open_until":"0001`) {
		t.Errorf("zero times are written: %s", js)
	}
	// Once OpenFor passed, the snapshot says half_open before any plan
	// looked.
	clk.Advance(30 * time.Second)
	if th := healthOf(r, "p0/m"); th.State != HalfOpen || !th.Available || !th.OpenUntil.IsZero() {
		t.Fatalf("after OpenFor: %+v", th)
	}
}

func TestOnChange(t *testing.T) {
	var got []string
	onChange := func(c Change) {
		s := c.Target.Key() + " " + c.From.String() + ">" + c.To.String() + " " + string(c.Reason)
		if c.Cooldown {
			s = c.Target.Key() + " cool " + string(c.Reason)
		}
		got = append(got, s)
	}
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Second}, Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	r, clk := testRouter(t, cfg, Options{OnChange: onChange})
	attempt(t, r, "a", always(fail500))
	clk.Advance(time.Second)
	attempt(t, r, "a", always(fail500))
	clk.Advance(2 * time.Second)
	attempt(t, r, "a", always(ok200))
	attempt(t, r, "a", always(Result{Kind: Answered, Status: 503, Header: map[string][]string{"Retry-After": {"1"}}}))
	want := []string{
		"p0/m closed>open consecutive_failures",
		"p0/m open>half_open open_for_passed",
		"p0/m half_open>open trial_failed",
		"p0/m open>half_open open_for_passed",
		"p0/m half_open>closed trials_succeeded",
		"p0/m closed>open consecutive_failures",
		"p0/m cool overloaded",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A new configuration's Router keeps the health of the targets and the
// budgets of the aliases the old one had.
func TestPreviousCarriesOver(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1}, Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	old, clk := testRouter(t, cfg)
	attempt(t, old, "a", failing(fail500, "p0/m"))
	attempt(t, old, "a", failing(rateLimit("Retry-After", "40"), "p1/m"))

	next, err := New(Config{Breaker: BreakerConfig{ConsecutiveFailures: 1}, Aliases: []AliasConfig{
		alias("a", Weighted, 3), {Name: "b", Targets: []TargetConfig{{Provider: "p1", Model: "m"}}}}},
		Options{Now: clk.Now, Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	if h := healthOf(next, "p0/m"); h.State != Open || h.Requests != 1 {
		t.Fatalf("p0/m in the new router: %+v", h)
	}
	if h := healthOf(next, "p1/m"); h.CooldownUntil.IsZero() || h.Requests != 2 {
		t.Fatalf("p1/m in the new router: %+v", h)
	}
	if h := healthOf(next, "p2/m"); h.Requests != 0 || h.State != Closed {
		t.Fatalf("p2/m: %+v", h)
	}
	if b := next.Health().Aliases[0].RetryBudget; b.Requests != 2 || b.Retries != 1 {
		t.Fatalf("budget of a: %+v, want the old one's 2 requests and 1 retry", b)
	}
	// The old router's late reports reach the same health.
	p, _ := old.PlanTarget("p1/m", false)
	p.Next()
	p.Close()

	// A different breaker window: counts restart, the state stays.
	third, err := New(Config{Breaker: BreakerConfig{Window: time.Minute}, Aliases: []AliasConfig{alias("a", Ordered, 2)}},
		Options{Now: clk.Now, Previous: next})
	if err != nil {
		t.Fatal(err)
	}
	if h := healthOf(third, "p0/m"); h.State != Open || h.WindowRequests != 0 || h.Requests != 1 {
		t.Fatalf("p0/m with a new window: %+v", h)
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{Closed, HalfOpen, Open} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("%s: %v %v", b, back, err)
		}
	}
	var s State
	if err := s.UnmarshalText([]byte("ajar")); err == nil {
		t.Fatal("an unknown state was read")
	}
}
