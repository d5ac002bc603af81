package caddygateway

import (
	"fmt"
	"maps"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/guardrails"
)

// provisionGuards builds the guard engine of the guardrails block (nil:
// no guards): placeholders in webhooks' URLs and headers resolved, and
// every moderation guard's provider one of the configured providers of
// type openai, whose moderation endpoint it reaches through the
// provider's upstream.
func (a *App) provisionGuards() (*guardrails.Engine, error) {
	if a.Guardrails == nil || len(a.Guardrails.Guards) == 0 {
		return nil, nil
	}
	repl := caddy.NewReplacer()
	cfg := guardrails.Config{Guards: make([]guardrails.GuardConfig, len(a.Guardrails.Guards))}
	for i, g := range a.Guardrails.Guards {
		g.URL = repl.ReplaceKnown(g.URL, "")
		g.Headers = maps.Clone(g.Headers)
		for k, v := range g.Headers {
			g.Headers[k] = repl.ReplaceKnown(v, "")
		}
		if g.Type == "moderation" {
			p := a.providers[g.Provider]
			switch {
			case p == nil:
				return nil, fmt.Errorf("guardrails: guard %s: provider %q is not a configured provider", g.Name, g.Provider)
			case p.Type != "openai":
				return nil, fmt.Errorf("guardrails: guard %s: provider %q is of type %s, which has no moderation endpoint (type openai has)", g.Name, g.Provider, p.Type)
			}
		}
		cfg.Guards[i] = g
	}
	eng, err := guardrails.New(cfg, guardrails.Options{Moderator: gateway.Moderator(a.providers)})
	if err != nil {
		return nil, fmt.Errorf("guardrails: %w", err)
	}
	a.guardCounts = countsOf(eng.Guards())
	return eng, nil
}

// numActions is the number of guardrails' actions, Allow to Error.
const numActions = int(guardrails.Error) + 1

// guardCounts are one guard's counters of the decisions metric, one for
// each action. They are looked up once, when the config is provisioned,
// so that each guard's series is there from the start at 0, and a
// decision is counted without a lookup: in a busy server, a lookup by
// labels reads a map and a lock that are out of the core's caches by the
// next call.
type guardCounts struct {
	guard    string
	byAction [numActions]prometheus.Counter
}

// countsOf returns the counters of guards.
func countsOf(guards []string) []guardCounts {
	cs := make([]guardCounts, len(guards))
	for i, g := range guards {
		cs[i].guard = g
		for a := range numActions {
			cs[i].byAction[a] = guardDecisions.WithLabelValues(g, guardrails.Action(a).String())
		}
	}
	return cs
}

// guardDecisions counts the guards' decisions.
var guardDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "modelgate", Name: "guard_decisions_total",
	Help: "Decisions of guards on requests and answers, by guard and action: allow, mask, block, log, error (the guard could not decide).",
}, []string{"guard", "action"})

// Guarded counts the guards' decisions and emits content_blocked for a
// guard that blocked.
func (ob observer) Guarded(c *gateway.Call, model string, ds []guardrails.Decision) {
	for i := range ds {
		d := &ds[i]
		if cs := ob.a.guardCounts; d.Index < len(cs) && cs[d.Index].guard == d.Guard && int(d.Action) < numActions {
			cs[d.Index].byAction[d.Action].Inc()
		} else {
			// Not a guard of this config's engine: counted by its labels.
			guardDecisions.WithLabelValues(d.Guard, d.Action.String()).Inc()
		}
		if d.Action != guardrails.Block {
			continue
		}
		key, owner := "", ""
		if c.Key != nil {
			key, owner = c.Key.Name, c.Key.Owner
		}
		a := ob.a
		a.events.Emit(a.ctx, "content_blocked", map[string]any{
			"guard": d.Guard, "type": d.Type, "direction": d.Direction.String(), "reason": d.Reason,
			"key": key, "owner": owner, "model": model, "endpoint": c.API.String(),
		})
	}
}
