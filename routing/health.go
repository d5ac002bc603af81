package routing

import (
	"cmp"
	"slices"
	"time"
)

// Health is a snapshot of every target and alias, for an admin endpoint
// (as JSON) and for metrics.
type Health struct {
	Targets []TargetHealth `json:"targets"`
	Aliases []AliasHealth  `json:"aliases"`
}

// TargetHealth is a snapshot of one target.
type TargetHealth struct {
	Target   string `json:"target"` // "<provider>/<model>"
	Provider string `json:"provider"`
	Model    string `json:"model"`

	// State is the breaker's state now: an open breaker whose time has
	// passed is half_open.
	State State `json:"state"`
	// OpenUntil is when an open breaker lets trials through.
	OpenUntil time.Time `json:"open_until,omitzero"`
	// CooldownUntil is when a cool-down in force ends.
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	// Available reports whether a plan would offer the target now.
	Available bool `json:"available"`

	// WindowRequests and WindowFailures are the attempts and failures in
	// the breaker's window; ErrorRate their ratio.
	WindowRequests int64   `json:"window_requests"`
	WindowFailures int64   `json:"window_failures"`
	ErrorRate      float64 `json:"error_rate"`
	// ConsecutiveFailures is the failures in a row now.
	ConsecutiveFailures int64 `json:"consecutive_failures"`

	// LatencyMS is the average latency of whole answers, TTFBMS of a
	// stream's first byte, in milliseconds; 0 before any sample.
	LatencyMS float64 `json:"latency_ms"`
	TTFBMS    float64 `json:"ttfb_ms"`
	// InFlight is the attempts offered and not yet reported.
	InFlight int64 `json:"in_flight"`

	// Totals since the target was first configured: attempts, failures,
	// breaker openings, cool-downs started.
	Requests  uint64 `json:"requests"`
	Failures  uint64 `json:"failures"`
	Opens     uint64 `json:"opens"`
	Cooldowns uint64 `json:"cooldowns"`

	// FirstTokenTimeout and IdleTimeout are the stream timeouts in force,
	// in milliseconds; 0: none.
	FirstTokenTimeoutMS int64 `json:"first_token_timeout_ms,omitempty"`
	IdleTimeoutMS       int64 `json:"idle_timeout_ms,omitempty"`
}

// AliasHealth is a snapshot of one alias.
type AliasHealth struct {
	Alias       string             `json:"alias"`
	Policy      Policy             `json:"policy"`
	Targets     []AliasTargetEntry `json:"targets"`
	RetryBudget BudgetHealth       `json:"retry_budget"`
}

// AliasTargetEntry is one target as an alias lists it.
type AliasTargetEntry struct {
	Target   string   `json:"target"`
	Priority int      `json:"priority"`
	Weight   uint64   `json:"weight"`
	Cost     *float64 `json:"cost,omitempty"` // the cost function's value, when priced
}

// Health returns a snapshot, targets and aliases sorted by name.
func (r *Router) Health() Health {
	now := r.now()
	out := Health{Targets: make([]TargetHealth, 0, len(r.list)), Aliases: make([]AliasHealth, 0, len(r.aliases))}
	for _, t := range r.list {
		out.Targets = append(out.Targets, t.health(now))
	}
	for _, a := range r.aliases {
		ah := AliasHealth{Alias: a.name, Policy: a.policy, RetryBudget: a.budget.health(now)}
		for i, t := range a.targets {
			e := AliasTargetEntry{Target: t.key, Priority: a.priorities[i], Weight: a.weights[i]}
			if t.priced {
				c := t.cost
				e.Cost = &c
			}
			ah.Targets = append(ah.Targets, e)
		}
		out.Aliases = append(out.Aliases, ah)
	}
	slices.SortFunc(out.Aliases, func(a, b AliasHealth) int { return cmp.Compare(a.Alias, b.Alias) })
	return out
}

// health is a snapshot of t at now.
func (t *Target) health(now int64) TargetHealth {
	h := t.h
	n, failed := h.errs.sum(now)
	th := TargetHealth{
		Target: t.key, Provider: t.provider, Model: t.model,
		State:               State(h.state.Load()),
		WindowRequests:      int64(n),
		WindowFailures:      int64(failed),
		ConsecutiveFailures: int64(h.consecutive.Load()),
		LatencyMS:           t.averageOf(false) / float64(time.Millisecond),
		TTFBMS:              t.averageOf(true) / float64(time.Millisecond),
		InFlight:            int64(h.inflight.Load()),
		Requests:            h.requests.Load(),
		Failures:            h.failures.Load(),
		Opens:               h.opened.Load(),
		Cooldowns:           h.cooldowns.Load(),
		FirstTokenTimeoutMS: t.firstToken.Milliseconds(),
		IdleTimeoutMS:       t.idle.Milliseconds(),
	}
	if n > 0 {
		th.ErrorRate = float64(failed) / float64(n)
	}
	if th.State == Open {
		if ou := h.openUntil.Load(); now < ou {
			th.OpenUntil = time.Unix(0, ou).UTC()
		} else {
			th.State = HalfOpen
		}
	}
	if cu := h.coolUntil.Load(); now < cu {
		th.CooldownUntil = time.Unix(0, cu).UTC()
	}
	th.Available = th.CooldownUntil.IsZero() && (th.State == Closed ||
		th.State == HalfOpen && int(count(h.trials.Load())) < t.r.cfg.Breaker.HalfOpenProbes)
	return th
}
