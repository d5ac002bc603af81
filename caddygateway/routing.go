package caddygateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/routing"
	"github.com/modelgate/modelgate/state"
)

// This file hosts the routing engine (package routing, docs/routing.md):
// the router of each config, provisioned with the previous config's so
// that the targets' health and the metrics' totals carry over a reload;
// shared with the other instances on a shared state; its changes logged
// and emitted as events; its health on the admin endpoint and in the
// metrics.

// routers are the routers last started, by storage identity: the next
// config on the same storage inherits its targets' health from it.
var routers sync.Map // storageID -> *routing.Router

// currentRouter is the router of the config started last, which the
// metrics read at scrape time.
var currentRouter atomic.Pointer[routing.Router]

// provisionRouter builds the routing engine of the config's aliases.
func (a *App) provisionRouter() error {
	cfg, err := a.Routing.Engine(a.Models)
	if err != nil {
		return err
	}
	var prev *routing.Router
	if v, ok := routers.Load(a.storageID); ok {
		prev = v.(*routing.Router)
	}
	a.router, err = routing.New(cfg, routing.Options{Cost: a.routingCost, OnChange: a.routingChanged, Previous: prev})
	return err
}

// routingCost prices a target for the lowest-cost policy: a request of a
// thousand input and a thousand output tokens, at the price table's
// rates for the provider's type.
func (a *App) routingCost(provider, model string) (float64, bool) {
	p := a.providers[provider]
	if p == nil || a.prices == nil {
		return 0, false
	}
	c, ok := a.prices.Cost(p.Type, model, pricing.Usage{PromptTokens: 1000, CompletionTokens: 1000})
	return c.Dollars(), ok
}

// routingChanged logs a breaker's change or a cool-down, and emits it as
// an event. It runs on the reporting goroutine and must not block.
func (a *App) routingChanged(c routing.Change) {
	fields := []zap.Field{zap.String("target", c.Target.Key()), zap.String("reason", string(c.Reason)),
		zap.Time("until", c.Until), zap.Bool("remote", c.Remote)}
	log := a.logger.Named("routing")
	name := "routing_breaker"
	data := map[string]any{"provider": c.Target.Provider(), "model": c.Target.Model(), "reason": string(c.Reason),
		"remote": c.Remote, "state": c.To.String()}
	switch {
	case c.Cooldown:
		log.Warn("provider cool-down", fields...)
		name = "routing_cooldown"
		delete(data, "state")
		data["until"] = c.Until.UTC().Format(time.RFC3339Nano)
	case c.To == routing.Open:
		log.Warn("circuit breaker opened", fields...)
		data["until"] = c.Until.UTC().Format(time.RFC3339Nano)
	case c.To == routing.Closed:
		log.Info("circuit breaker closed", fields[:2]...)
	default:
		log.Debug("circuit breaker half-open", fields[:2]...)
	}
	if a.events != nil && a.ctx.Context != nil {
		// Emit runs the handlers synchronously: off the request path.
		go a.events.Emit(a.ctx, name, data)
	}
}

// startRouter makes the config's router the current one (its health in
// the metrics, the next config's inheritance) and, on a shared state,
// shares it with the other instances. Sharing starts in the background:
// a state slow to subscribe (Redis unreachable) must not hold up the
// config's start, as the keys' subscription does not; until it is
// shared, the router keeps its own counts.
func (a *App) startRouter() {
	routers.Store(a.storageID, a.router)
	currentRouter.Store(a.router)
	if !a.stateShared {
		return
	}
	dl, _ := a.state.(state.Deadlines)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer recoverLog(a.logger, "sharing the routing engine")
		stop, err := a.router.Share(ctx, routing.Shared{PubSub: a.state, Deadlines: dl, Logger: a.logger.Named("routing")})
		if err != nil {
			if ctx.Err() == nil {
				a.logger.Error("sharing circuit breakers and cool-downs with the other instances; this instance keeps its own", zap.Error(err))
			}
			return
		}
		<-ctx.Done()
		stop()
	}()
	a.stopRouting = func() { cancel(); <-done }
}

// stopRouter stops sharing the config's router, and forgets it unless
// the next config's replaced it already (a reload starts the next config
// before it stops this one).
func (a *App) stopRouter() {
	if a.stopRouting != nil {
		a.stopRouting()
		a.stopRouting = nil
	}
	if a.router != nil {
		routers.CompareAndDelete(a.storageID, a.router)
		currentRouter.CompareAndSwap(a.router, nil)
	}
}

// Router is the config's routing engine, for the admin endpoint's health.
func (a *App) Router() *routing.Router { return a.router }

// routingCollector reads the current router's health at scrape time: no
// hook on the request path. Labels hold configured names only.
type routingCollector struct{}

var (
	breakerStateDesc = prometheus.NewDesc("caddy_modelgate_breaker_state",
		"The circuit breaker's state of each target: 0 closed, 1 half-open, 2 open.", []string{"provider", "model"}, nil)
	breakerOpensDesc = prometheus.NewDesc("caddy_modelgate_breaker_opens_total",
		"Circuit breaker openings of each target.", []string{"provider", "model"}, nil)
	cooldownsDesc = prometheus.NewDesc("caddy_modelgate_cooldowns_total",
		"Cool-downs started of each target (a 429, or a 503 or 529 that said when to come back).", []string{"provider", "model"}, nil)
	budgetExhaustedDesc = prometheus.NewDesc("caddy_modelgate_retry_budget_exhausted_total",
		"Retries an alias's retry budget refused.", []string{"alias"}, nil)
)

// Describe implements prometheus.Collector.
func (routingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- breakerOpensDesc
	ch <- cooldownsDesc
	ch <- budgetExhaustedDesc
}

// Collect implements prometheus.Collector.
func (routingCollector) Collect(ch chan<- prometheus.Metric) {
	r := currentRouter.Load()
	if r == nil {
		return
	}
	h := r.Health()
	for _, t := range h.Targets {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, float64(t.State), t.Provider, t.Model)
		ch <- prometheus.MustNewConstMetric(breakerOpensDesc, prometheus.CounterValue, float64(t.Opens), t.Provider, t.Model)
		ch <- prometheus.MustNewConstMetric(cooldownsDesc, prometheus.CounterValue, float64(t.Cooldowns), t.Provider, t.Model)
	}
	for _, al := range h.Aliases {
		ch <- prometheus.MustNewConstMetric(budgetExhaustedDesc, prometheus.CounterValue, float64(al.RetryBudget.Exhausted), al.Alias)
	}
}
