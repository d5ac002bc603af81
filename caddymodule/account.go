package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/pricing"
)

// This file settles every request the gateway answered (DESIGN.md §2c):
// what it used is priced from the price table, counted in the metrics,
// written into the access log entry and its placeholders, and handed to
// the limits, budgets and usage accounting.

// accountant is the app's guard: it admits calls (quota.go) and settles
// them.
type accountant struct {
	app *App
}

// admit admits a call by its key's and owner's limits and budgets (a
// refusal is answered here) and returns what settles it.
func (ac accountant) admit(w http.ResponseWriter, r *http.Request, key *Key, c *call, targets []target) (func(http.ResponseWriter, *http.Request, *meter), bool) {
	ad, ok := ac.app.admitQuota(w, r, key, c, targets)
	if !ok {
		return nil, false
	}
	return func(w http.ResponseWriter, r *http.Request, m *meter) {
		var cost pricing.Money
		var priced bool
		if m != nil {
			cost, priced = ac.settle(r, key, c, m)
			ac.app.recordUsage(key, m, ad, cost, priced)
		}
		ad.done(r.Context(), m, cost, priced)
	}, true
}

// settle prices what a call used and reports it in the metrics, the access
// log entry and the placeholders.
func (ac accountant) settle(r *http.Request, key *Key, c *call, m *meter) (pricing.Money, bool) {
	p := m.provider
	u := m.usage.pricing()
	cost, priced := pricing.Money(0), false
	switch {
	case c.endpoint.free:
		priced = true
	case m.usage.Known:
		cost, priced = ac.app.prices.Cost(p.typ, m.model, u)
	}
	label := ac.app.modelLabel(p, m.model)
	observeUsage(p.name, label, m, cost, priced)

	fields := []zap.Field{
		zap.String("modelgate_provider", p.name),
		zap.String("modelgate_model", m.model),
		zap.Int64("modelgate_tokens_in", u.PromptTokens+u.EmbeddingTokens),
		zap.Int64("modelgate_tokens_out", u.CompletionTokens),
		zap.Int64("modelgate_tokens_cached", u.CachedTokens),
		zap.Strings("modelgate_fallback", m.tried),
	}
	costText := "unpriced"
	if priced {
		costText = cost.String()
	}
	fields = append(fields, zap.String("modelgate_cost", costText))
	if key != nil {
		fields = append(fields, zap.String("modelgate_key", key.Name), zap.String("modelgate_owner", key.Owner))
	}
	if !m.firstByte.IsZero() {
		fields = append(fields, zap.Int64("modelgate_ttft_ms", m.firstByte.Sub(m.start).Milliseconds()))
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		for _, f := range fields {
			extra.Set(f)
		}
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		m.placeholders(func(k string, v any) { repl.Set(k, v) }, costText, priced)
	}
	return cost, priced
}

// pricing is the usage as the price table reads it.
func (u usageInfo) pricing() pricing.Usage {
	return pricing.Usage{PromptTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		CompletionTokens: u.Completion, Searches: u.Searches, EmbeddingTokens: u.Embedding}
}

// modelLabel is the model as the metrics name it: a model the
// configuration or the price table knows, else "other", so that a client
// cannot grow the metrics without bound by inventing model names.
func (a *App) modelLabel(p *provider, model string) string {
	for _, m := range p.base.Models {
		if m == model {
			return model
		}
	}
	if _, ok := a.knownModels[p.name+"/"+model]; ok {
		return model
	}
	if e, ok := a.prices.Lookup(p.typ, model); ok {
		return e.Model()
	}
	return "other"
}
