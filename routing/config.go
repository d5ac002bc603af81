package routing

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Config is the routing of every alias and the settings they share. The
// zero value of each setting takes its default (the Default* constants);
// a Router holds a copy with the defaults filled in.
type Config struct {
	// Aliases are the model aliases and their targets.
	Aliases []AliasConfig

	// Breaker tunes the circuit breaker of every target.
	Breaker BreakerConfig

	// Cooldown bounds the cool-downs providers ask for.
	Cooldown CooldownConfig

	// RetryBudget bounds the attempts after a first one, per alias.
	RetryBudget BudgetConfig

	// LatencySamples is about how many recent answers the latency average
	// of a target follows: each answer weighs 2/(LatencySamples+1).
	// Default: DefaultLatencySamples.
	LatencySamples int

	// FirstTokenTimeout is how long a stream may take to send its first
	// byte before the host gives up on the target and tries the next one,
	// for targets that do not set their own. Default: none.
	FirstTokenTimeout time.Duration

	// IdleTimeout is how long a stream may go silent after its first byte
	// before the host cuts it, for targets that do not set their own.
	// Default: none.
	IdleTimeout time.Duration
}

// AliasConfig is one model alias: its targets and how to choose among
// them.
type AliasConfig struct {
	// Name is the bare model name clients send.
	Name string
	// Policy chooses among the targets of a priority group. Default:
	// Ordered.
	Policy Policy
	// Targets are tried per the policy, the groups of a lower Priority
	// first. At most MaxTargets, each at most once.
	Targets []TargetConfig
}

// TargetConfig is one target of an alias.
type TargetConfig struct {
	// Provider is the configured provider's name; Model the provider's
	// name of the model.
	Provider, Model string
	// Weight is the target's share of its group's requests under the
	// weighted policy. Default: 1.
	Weight int
	// Priority is the target's group: the targets of the lowest priority
	// are tried first, those of the next only once all of a group's
	// targets are out of rotation or tried. Default: 0.
	Priority int
	// FirstTokenTimeout and IdleTimeout override Config's for this
	// target. 0: Config's.
	FirstTokenTimeout, IdleTimeout time.Duration
}

// Key is the target as logs, metrics and the shared state name it:
// "<provider>/<model>".
func (t TargetConfig) Key() string { return t.Provider + "/" + t.Model }

// BreakerConfig tunes the circuit breakers. A breaker opens when either
// trigger fires; it stays open for OpenFor, doubled at each opening that
// follows a failed trial without a close in between, up to MaxOpenFor.
type BreakerConfig struct {
	// Off turns the circuit breakers off: failing targets stay in
	// rotation. Cool-downs still apply.
	Off bool
	// ConsecutiveFailures opens the breaker after that many failures in a
	// row. Default: DefaultConsecutiveFailures.
	ConsecutiveFailures int
	// ErrorRate opens the breaker when at least that share of the
	// attempts in Window failed, once there were MinRequests of them.
	// Between 0 and 1. Default: DefaultErrorRate.
	ErrorRate float64
	// MinRequests is how many attempts Window must hold before ErrorRate
	// counts. Default: DefaultMinRequests.
	MinRequests int
	// Window is the span the error rate is measured over (in ten steps).
	// Default: DefaultWindow.
	Window time.Duration
	// OpenFor is how long an opened breaker keeps the target out before
	// trial requests go to it. Default: DefaultOpenFor.
	OpenFor time.Duration
	// MaxOpenFor caps OpenFor's doubling. Default: DefaultMaxOpenFor.
	MaxOpenFor time.Duration
	// HalfOpenProbes is how many trial requests a half-open breaker lets
	// through at once, and how many must succeed to close it; one failure
	// opens it again. Default: DefaultHalfOpenProbes.
	HalfOpenProbes int
}

// CooldownConfig bounds cool-downs: a 429, or a 503 that says when to come
// back, keeps the target out of rotation on every instance.
type CooldownConfig struct {
	// Default is the cool-down of a 429 whose headers say nothing usable.
	// Default: DefaultCooldown.
	Default time.Duration
	// Max caps every cool-down, whatever the provider's headers say.
	// Default: DefaultMaxCooldown.
	Max time.Duration
}

// BudgetConfig is the retry budget of an alias: over the last Window, the
// attempts after a request's first may be at most Ratio of the requests
// plus MinPerSecond for each second of Window.
type BudgetConfig struct {
	// Off lifts the budget: every target of a plan may be tried.
	Off bool
	// Ratio is the share of requests that may be retried. Between 0 and
	// 1. Default: DefaultRetryRatio.
	Ratio float64
	// MinPerSecond is the floor that lets a quiet alias retry at all.
	// Default: DefaultRetryMinPerSecond.
	MinPerSecond float64
	// Window is the span requests and retries are counted over (in ten
	// steps). Default: DefaultRetryWindow.
	Window time.Duration
}

// Defaults of the settings.
const (
	DefaultConsecutiveFailures = 5
	DefaultErrorRate           = 0.5
	DefaultMinRequests         = 20
	DefaultWindow              = 30 * time.Second
	DefaultOpenFor             = 30 * time.Second
	DefaultMaxOpenFor          = 5 * time.Minute
	DefaultHalfOpenProbes      = 1

	DefaultCooldown    = time.Second
	DefaultMaxCooldown = 5 * time.Minute

	DefaultRetryRatio        = 0.2
	DefaultRetryMinPerSecond = 3
	DefaultRetryWindow       = 10 * time.Second

	DefaultLatencySamples = 10

	// MaxTargets is the most targets an alias may have.
	MaxTargets = 64
)

// Policy chooses among the targets of a priority group.
type Policy uint8

// The policies.
const (
	// Ordered tries the targets in the order they are listed.
	Ordered Policy = iota
	// Weighted picks targets at random in proportion to their weights.
	Weighted
	// LowestLatency picks, of two targets drawn at random, the one with
	// the lower average latency (time to first byte for streams, the
	// whole answer otherwise), weighed by the attempts it has in flight.
	LowestLatency
	// LowestCost tries the cheapest target first, by the host's cost
	// function (Options.Cost); targets it cannot price come last, in
	// their listed order.
	LowestCost
)

var policyNames = [...]string{Ordered: "ordered", Weighted: "weighted", LowestLatency: "latency", LowestCost: "cost"}

// String is the policy's name in the configuration.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", p)
}

// ParsePolicy reads a policy's name: ordered, weighted, latency or cost.
func ParsePolicy(s string) (Policy, error) {
	for p, name := range policyNames {
		if s == name {
			return Policy(p), nil
		}
	}
	return 0, fmt.Errorf("routing policy %q is not one of %s", s, strings.Join(policyNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (p Policy) MarshalText() ([]byte, error) {
	if int(p) >= len(policyNames) {
		return nil, fmt.Errorf("unknown routing policy %d", p)
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// withDefaults returns c with every unset setting at its default.
func (c Config) withDefaults() Config {
	b := &c.Breaker
	setDefault(&b.ConsecutiveFailures, DefaultConsecutiveFailures)
	setDefault(&b.ErrorRate, DefaultErrorRate)
	setDefault(&b.MinRequests, DefaultMinRequests)
	setDefault(&b.Window, DefaultWindow)
	setDefault(&b.OpenFor, DefaultOpenFor)
	setDefault(&b.MaxOpenFor, max(DefaultMaxOpenFor, b.OpenFor))
	setDefault(&b.HalfOpenProbes, DefaultHalfOpenProbes)
	setDefault(&c.Cooldown.Default, DefaultCooldown)
	setDefault(&c.Cooldown.Max, max(DefaultMaxCooldown, c.Cooldown.Default))
	setDefault(&c.RetryBudget.Ratio, DefaultRetryRatio)
	setDefault(&c.RetryBudget.MinPerSecond, DefaultRetryMinPerSecond)
	setDefault(&c.RetryBudget.Window, DefaultRetryWindow)
	setDefault(&c.LatencySamples, DefaultLatencySamples)
	return c
}

func setDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports the first setting that is out of range, after
// defaults: a Router is only built from a valid Config.
func (c Config) Validate() error {
	c = c.withDefaults()
	b := c.Breaker
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(b.ConsecutiveFailures > 0, "breaker consecutive_failures %d is not above 0", b.ConsecutiveFailures)
	check(b.ErrorRate > 0 && b.ErrorRate <= 1, "breaker error_rate %v is not above 0 and at most 1", b.ErrorRate)
	check(b.MinRequests > 0, "breaker min_requests %d is not above 0", b.MinRequests)
	check(b.Window >= 10*time.Millisecond, "breaker window %v is shorter than 10ms", b.Window)
	check(b.OpenFor > 0, "breaker open_for %v is not above 0", b.OpenFor)
	check(b.MaxOpenFor >= b.OpenFor, "breaker max_open_for %v is shorter than open_for %v", b.MaxOpenFor, b.OpenFor)
	check(b.HalfOpenProbes > 0 && b.HalfOpenProbes <= math.MaxInt32, "breaker half_open_probes %d is not above 0", b.HalfOpenProbes)
	check(c.Cooldown.Default > 0, "cooldown default %v is not above 0", c.Cooldown.Default)
	check(c.Cooldown.Max >= c.Cooldown.Default, "cooldown max %v is shorter than the default %v", c.Cooldown.Max, c.Cooldown.Default)
	r := c.RetryBudget
	check(r.Ratio > 0 && r.Ratio <= 1, "retry_budget ratio %v is not above 0 and at most 1", r.Ratio)
	check(r.MinPerSecond >= 0 && !math.IsInf(r.MinPerSecond, 0), "retry_budget min_per_second %v is below 0", r.MinPerSecond)
	check(r.Window >= 10*time.Millisecond, "retry_budget window %v is shorter than 10ms", r.Window)
	check(c.LatencySamples > 0, "latency_samples %d is not above 0", c.LatencySamples)
	check(c.FirstTokenTimeout >= 0, "first_token_timeout %v is below 0", c.FirstTokenTimeout)
	check(c.IdleTimeout >= 0, "idle_timeout %v is below 0", c.IdleTimeout)
	seen := make(map[string]bool, len(c.Aliases))
	timeouts := make(map[string]TargetConfig) // a target's first listing with a timeout
	for _, a := range c.Aliases {
		if err := a.validate(); err != nil {
			errs = append(errs, err)
		}
		check(!seen[a.Name], "alias %q is defined twice", a.Name)
		seen[a.Name] = true
		for _, t := range a.Targets {
			if t.FirstTokenTimeout == 0 && t.IdleTimeout == 0 {
				continue
			}
			prev, ok := timeouts[t.Key()]
			check(!ok || prev.FirstTokenTimeout == t.FirstTokenTimeout && prev.IdleTimeout == t.IdleTimeout,
				"target %s has different timeouts in two aliases (a target's timeouts are the same wherever it is listed)", t.Key())
			timeouts[t.Key()] = t
		}
	}
	return errors.Join(errs...)
}

func (a AliasConfig) validate() error {
	switch {
	case a.Name == "":
		return errors.New("an alias has no name")
	case len(a.Targets) == 0:
		return fmt.Errorf("alias %s: no targets", a.Name)
	case len(a.Targets) > MaxTargets:
		return fmt.Errorf("alias %s: %d targets, more than %d", a.Name, len(a.Targets), MaxTargets)
	case int(a.Policy) >= len(policyNames):
		return fmt.Errorf("alias %s: unknown policy %d", a.Name, a.Policy)
	}
	seen := make(map[string]bool, len(a.Targets))
	for _, t := range a.Targets {
		switch {
		case t.Provider == "" || t.Model == "" || strings.Contains(t.Provider, "/"):
			return fmt.Errorf("alias %s: target %q is not <provider>/<model>", a.Name, t.Key())
		case seen[t.Key()]:
			return fmt.Errorf("alias %s: target %s is listed twice", a.Name, t.Key())
		case t.Weight < 0:
			return fmt.Errorf("alias %s: target %s: weight %d is below 0", a.Name, t.Key(), t.Weight)
		case t.Weight > 1_000_000:
			return fmt.Errorf("alias %s: target %s: weight %d is above 1000000", a.Name, t.Key(), t.Weight)
		case t.FirstTokenTimeout < 0 || t.IdleTimeout < 0:
			return fmt.Errorf("alias %s: target %s: a timeout is below 0", a.Name, t.Key())
		}
		seen[t.Key()] = true
	}
	return nil
}
