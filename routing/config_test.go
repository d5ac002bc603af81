package routing

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := alias("a", Ordered, 2)
	tests := []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"defaults", Config{Aliases: []AliasConfig{ok}}, ""},
		{"empty", Config{}, ""},
		{"error rate above 1", Config{Breaker: BreakerConfig{ErrorRate: 1.5}}, "error_rate"},
		{"negative failures", Config{Breaker: BreakerConfig{ConsecutiveFailures: -1}}, "consecutive_failures"},
		{"max below open", Config{Breaker: BreakerConfig{OpenFor: time.Minute, MaxOpenFor: time.Second}}, "max_open_for"},
		{"tiny window", Config{Breaker: BreakerConfig{Window: time.Millisecond}}, "window"},
		{"cooldown max below default", Config{Cooldown: CooldownConfig{Default: time.Minute, Max: time.Second}}, "cooldown max"},
		{"ratio", Config{RetryBudget: BudgetConfig{Ratio: 2}}, "ratio"},
		{"floor", Config{RetryBudget: BudgetConfig{MinPerSecond: -1}}, "min_per_second"},
		{"negative timeout", Config{IdleTimeout: -time.Second}, "idle_timeout"},
		{"no name", Config{Aliases: []AliasConfig{{Targets: ok.Targets}}}, "no name"},
		{"no targets", Config{Aliases: []AliasConfig{{Name: "a"}}}, "no targets"},
		{"twice", Config{Aliases: []AliasConfig{ok, ok}}, "defined twice"},
		{"target twice", Config{Aliases: []AliasConfig{{Name: "a", Targets: []TargetConfig{ok.Targets[0], ok.Targets[0]}}}}, "listed twice"},
		{"bad target", Config{Aliases: []AliasConfig{{Name: "a", Targets: []TargetConfig{{Provider: "p"}}}}}, "not <provider>/<model>"},
		{"slash in provider", Config{Aliases: []AliasConfig{{Name: "a", Targets: []TargetConfig{{Provider: "p/q", Model: "m"}}}}}, "not <provider>/<model>"},
		{"negative weight", Config{Aliases: []AliasConfig{{Name: "a", Targets: []TargetConfig{{Provider: "p", Model: "m", Weight: -1}}}}}, "weight"},
		{"policy", Config{Aliases: []AliasConfig{{Name: "a", Policy: 9, Targets: ok.Targets}}}, "unknown policy"},
		{"timeouts differ", Config{Aliases: []AliasConfig{
			{Name: "a", Targets: []TargetConfig{{Provider: "p", Model: "m", FirstTokenTimeout: time.Second}}},
			{Name: "b", Targets: []TargetConfig{{Provider: "p", Model: "m", FirstTokenTimeout: 2 * time.Second}}}}}, "different timeouts"},
	}
	many := AliasConfig{Name: "many"}
	for i := range MaxTargets + 1 {
		many.Targets = append(many.Targets, TargetConfig{Provider: "p", Model: strings.Repeat("m", i+1)})
	}
	tests = append(tests, struct {
		name string
		cfg  Config
		want string
	}{"more than MaxTargets", Config{Aliases: []AliasConfig{many}}, "more than 64"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
			if _, nerr := New(tc.cfg, Options{}); (nerr == nil) != (err == nil) {
				t.Fatalf("New = %v, Validate = %v", nerr, err)
			}
		})
	}
}

func TestPolicyNames(t *testing.T) {
	for _, p := range []Policy{Ordered, Weighted, LowestLatency, LowestCost} {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q Policy
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("%s round trip: %v, %v", p, q, err)
		}
	}
	if _, err := ParsePolicy("fastest"); err == nil || !strings.Contains(err.Error(), "ordered, weighted, latency, cost") {
		t.Fatalf("ParsePolicy(fastest) = %v", err)
	}
}

// Timeouts: a target's own, else the config's; a target listed by two
// aliases has the timeouts one listing sets.
func TestTargetTimeouts(t *testing.T) {
	cfg := Config{FirstTokenTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, Aliases: []AliasConfig{
		{Name: "a", Targets: []TargetConfig{{Provider: "p", Model: "m"}, {Provider: "q", Model: "m"}}},
		{Name: "b", Targets: []TargetConfig{{Provider: "p", Model: "m", FirstTokenTimeout: 2 * time.Second}}},
	}}
	r, _ := testRouter(t, cfg)
	if p := r.Target("p/m"); p.FirstTokenTimeout() != 2*time.Second || p.IdleTimeout() != 30*time.Second {
		t.Fatalf("p/m timeouts %v, %v", p.FirstTokenTimeout(), p.IdleTimeout())
	}
	if q := r.Target("q/m"); q.FirstTokenTimeout() != 10*time.Second || q.IdleTimeout() != 30*time.Second {
		t.Fatalf("q/m timeouts %v, %v", q.FirstTokenTimeout(), q.IdleTimeout())
	}
	if q := r.Target("q/m"); q.Provider() != "q" || q.Model() != "m" || q.Key() != "q/m" {
		t.Fatalf("names %s %s %s", q.Provider(), q.Model(), q.Key())
	}
}
