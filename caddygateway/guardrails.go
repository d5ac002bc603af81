package caddygateway

import (
	"fmt"
	"maps"
	"sync"

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
	eng, err := guardrails.New(cfg, guardrails.Options{Moderator: gateway.Moderator(a.providers), Tally: guardTally})
	if err != nil {
		return nil, fmt.Errorf("guardrails: %w", err)
	}
	return eng, nil
}

// guardTallies are the guards' tallies of decisions by guard name, for
// the process: a guard of the same name in the next config counts on in
// the same tally, as a counter of Prometheus does. The decisions metric
// reads them when it is scraped, so that counting a decision is one
// atomic addition on the call's path.
var guardTallies struct {
	mu sync.Mutex
	m  map[string]*guardrails.Tally
}

// guardTally returns the tally of the guard named name, made the first
// time: from then on, the guard's series are in the metric, at 0 until
// it decides.
func guardTally(name string) *guardrails.Tally {
	guardTallies.mu.Lock()
	defer guardTallies.mu.Unlock()
	t := guardTallies.m[name]
	if t == nil {
		t = new(guardrails.Tally)
		if guardTallies.m == nil {
			guardTallies.m = make(map[string]*guardrails.Tally)
		}
		guardTallies.m[name] = t
	}
	return t
}

// guardDecisionsDesc is the decisions metric.
var guardDecisionsDesc = prometheus.NewDesc("caddy_modelgate_guard_decisions_total",
	"Decisions of guards on requests and answers, by guard and action: allow, mask, block, log, error (the guard could not decide).",
	[]string{"guard", "action"}, nil)

// guardCollector reads the guards' tallies at scrape time.
type guardCollector struct{}

// Describe implements prometheus.Collector.
func (guardCollector) Describe(ch chan<- *prometheus.Desc) { ch <- guardDecisionsDesc }

// Collect implements prometheus.Collector.
func (guardCollector) Collect(ch chan<- prometheus.Metric) {
	guardTallies.mu.Lock()
	defer guardTallies.mu.Unlock()
	for name, t := range guardTallies.m {
		for a := range guardrails.NumActions {
			ch <- prometheus.MustNewConstMetric(guardDecisionsDesc, prometheus.CounterValue,
				float64(t.Count(guardrails.Action(a))), name, guardrails.Action(a).String())
		}
	}
}

// Guarded emits content_blocked for each guard that blocked. The
// decisions are counted in the guards' tallies (guardCollector).
func (ob observer) Guarded(c *gateway.Call, model string, ds []guardrails.Decision) {
	for i := range ds {
		d := &ds[i]
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
