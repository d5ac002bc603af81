package routing

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// Router routes the aliases of one configuration. It is safe for
// concurrent use.
type Router struct {
	cfg      Config
	now      func() int64
	rand     func() uint64
	onChange func(Change)
	alpha    float64 // the latency average's weight of a new sample

	aliases map[string]*Alias
	targets map[string]*Target // by key
	list    []*Target          // by key

	shared atomic.Pointer[link] // set by Share
}

// Options are what a Router takes from its host besides the Config.
type Options struct {
	// Now is the clock. Default: time.Now.
	Now func() time.Time

	// Rand returns uniformly random numbers; it must be safe for
	// concurrent use. Default: math/rand/v2's Uint64.
	Rand func() uint64

	// Cost prices a target for the lowest-cost policy: any number that
	// orders targets by what a request costs on them (the host's price
	// table: input and output rates). ok false: the target is unpriced.
	// It is called when the Router is built. Default: every target is
	// unpriced, and the lowest-cost policy keeps the listed order.
	Cost func(provider, model string) (cost float64, ok bool)

	// OnChange, if set, is called when a breaker changes state or a
	// cool-down starts, for logs, events and metrics. It is called on
	// the reporting goroutine, after the change, and must not block.
	OnChange func(Change)

	// Previous is the Router of the configuration this one replaces: the
	// health of the targets both have, and the retry budgets of the
	// aliases both have, carry over.
	Previous *Router
}

// Change is a breaker's change of state, or the start of a cool-down.
type Change struct {
	Target   *Target
	From, To State // equal for a cool-down
	// Cooldown is set when a cool-down started (Until says until when).
	Cooldown bool
	// Until is when an opened breaker lets trials through, or when a
	// cool-down ends.
	Until  time.Time
	Reason Reason
	// Remote is set when another instance made the change.
	Remote bool
}

// Reason says why a breaker changed state or a cool-down started.
type Reason string

// The reasons of changes.
const (
	ReasonConsecutiveFailures Reason = "consecutive_failures"
	ReasonErrorRate           Reason = "error_rate"
	ReasonTrialFailed         Reason = "trial_failed"
	ReasonOpenForPassed       Reason = "open_for_passed"
	ReasonTrialsSucceeded     Reason = "trials_succeeded"
	ReasonRateLimited         Reason = "rate_limited" // a 429
	ReasonOverloaded          Reason = "overloaded"   // a 503 or 529 that said when to come back
	ReasonRemote              Reason = "another_instance"
)

// New builds the Router of cfg. cfg must be valid (Validate).
func New(cfg Config, opts Options) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Router{
		cfg:      cfg,
		onChange: opts.OnChange,
		alpha:    2 / (float64(cfg.LatencySamples) + 1),
		aliases:  make(map[string]*Alias, len(cfg.Aliases)),
		targets:  make(map[string]*Target),
		rand:     opts.Rand,
	}
	r.now = func() int64 { return time.Now().UnixNano() }
	if opts.Now != nil {
		now := opts.Now
		r.now = func() int64 { return now().UnixNano() }
	}
	if r.rand == nil {
		r.rand = rand.Uint64
	}
	for _, ac := range cfg.Aliases {
		a := &Alias{name: ac.Name, policy: ac.Policy, r: r}
		for _, tc := range ac.Targets {
			a.targets = append(a.targets, r.target(tc, opts))
			a.weights = append(a.weights, uint64(max(tc.Weight, 1)))
			a.priorities = append(a.priorities, tc.Priority)
		}
		a.groups = groupsOf(a)
		a.budget = newBudget(cfg.RetryBudget)
		if opts.Previous != nil {
			if prev := opts.Previous.aliases[ac.Name]; prev != nil && prev.budget.w.step == a.budget.w.step {
				a.budget = prev.budget
			}
		}
		r.aliases[ac.Name] = a
	}
	for _, t := range r.targets {
		r.list = append(r.list, t)
		t.solo = &Alias{name: t.key, r: r, targets: []*Target{t}, weights: []uint64{1}, priorities: []int{0},
			groups: []group{{order: []uint8{0}}}, budget: newBudget(BudgetConfig{Off: true})}
	}
	slices.SortFunc(r.list, func(a, b *Target) int { return cmp.Compare(a.key, b.key) })
	return r, nil
}

// target returns the Target of tc, made on first use: aliases that list
// the same provider and model share it, and the timeouts one listing
// sets (Validate refuses two that differ).
func (r *Router) target(tc TargetConfig, opts Options) *Target {
	key := tc.Key()
	if t, ok := r.targets[key]; ok {
		if tc.FirstTokenTimeout != 0 || tc.IdleTimeout != 0 {
			t.firstToken = cmp.Or(tc.FirstTokenTimeout, r.cfg.FirstTokenTimeout)
			t.idle = cmp.Or(tc.IdleTimeout, r.cfg.IdleTimeout)
		}
		return t
	}
	t := &Target{key: key, provider: tc.Provider, model: tc.Model, r: r,
		firstToken: cmp.Or(tc.FirstTokenTimeout, r.cfg.FirstTokenTimeout),
		idle:       cmp.Or(tc.IdleTimeout, r.cfg.IdleTimeout)}
	if opts.Cost != nil {
		t.cost, t.priced = opts.Cost(tc.Provider, tc.Model)
	}
	t.h = newHealth(r.cfg.Breaker.Window)
	if opts.Previous != nil {
		if prev := opts.Previous.targets[key]; prev != nil {
			t.h = inherit(prev.h, r.cfg.Breaker.Window)
		}
	}
	r.targets[key] = t
	return t
}

// groupsOf sorts an alias's targets into its priority groups, lowest
// priority first; within a group, the lowest-cost policy orders them by
// cost (the unpriced last), the others keep the listed order.
func groupsOf(a *Alias) []group {
	idx := make([]uint8, len(a.targets))
	for i := range idx {
		idx[i] = uint8(i)
	}
	slices.SortStableFunc(idx, func(i, j uint8) int {
		if c := cmp.Compare(a.priorities[i], a.priorities[j]); c != 0 || a.policy != LowestCost {
			return c
		}
		ti, tj := a.targets[i], a.targets[j]
		switch {
		case ti.priced && tj.priced:
			return cmp.Compare(ti.cost, tj.cost)
		case ti.priced:
			return -1
		case tj.priced:
			return 1
		}
		return 0
	})
	var groups []group
	for k, i := range idx {
		if k == 0 || a.priorities[i] != a.priorities[idx[k-1]] {
			groups = append(groups, group{priority: a.priorities[i]})
		}
		g := &groups[len(groups)-1]
		g.order = append(g.order, i)
	}
	return groups
}

// Alias is one model alias of a Router.
type Alias struct {
	name       string
	policy     Policy
	targets    []*Target
	weights    []uint64
	priorities []int
	groups     []group
	budget     *budget
	r          *Router
}

// group is the targets of one priority, as indexes into Alias.targets,
// in the order the policy starts from.
type group struct {
	priority int
	order    []uint8
}

// Name is the alias's name.
func (a *Alias) Name() string { return a.name }

// Policy is the alias's policy.
func (a *Alias) Policy() Policy { return a.policy }

// Targets are the alias's targets, as listed.
func (a *Alias) Targets() []*Target { return slices.Clone(a.targets) }

// Alias returns the alias of that name, or nil.
func (r *Router) Alias(name string) *Alias { return r.aliases[name] }

// Target returns the target "<provider>/<model>" that some alias lists,
// or nil.
func (r *Router) Target(key string) *Target { return r.targets[key] }

// Config returns the configuration the Router runs, defaults filled in.
func (r *Router) Config() Config { return r.cfg }

// Plan starts routing one request to alias; stream says whether the
// answer is streamed (the latency policy then compares times to first
// byte). ok is false for an unknown alias.
func (r *Router) Plan(alias string, stream bool) (p Plan, ok bool) {
	a := r.aliases[alias]
	if a == nil {
		return Plan{}, false
	}
	return a.Plan(stream), true
}

// PlanTarget starts a plan of one target alone, for a request that names
// "<provider>/<model>" itself: it honours and feeds the target's breaker
// and cool-downs. ok is false when no alias lists the target.
func (r *Router) PlanTarget(key string, stream bool) (p Plan, ok bool) {
	t := r.targets[key]
	if t == nil {
		return Plan{}, false
	}
	return t.solo.Plan(stream), true
}

// changed tells the host and the other instances of a change.
func (r *Router) changed(c Change) {
	if l := r.shared.Load(); l != nil && !c.Remote {
		l.send(c)
	}
	if r.onChange != nil {
		r.onChange(c)
	}
}

// String describes the router for debugging.
func (r *Router) String() string {
	return fmt.Sprintf("routing.Router{%d aliases, %d targets}", len(r.aliases), len(r.targets))
}
