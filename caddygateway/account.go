package caddygateway

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/pricing"
)

// This file settles every request the gateway answered (see docs/design/admission.md):
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

	// The access log entry and the placeholders (meter.placeholder) read
	// the settled meter when they are written.
	m.settled, m.key, m.cost, m.priced = true, key, cost, priced
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok && accessLogged(r) {
		extra.Set(zap.Field{Key: "modelgate", Type: zapcore.InlineMarshalerType, Interface: (*accessLogFields)(m)})
	}
	return cost, priced
}

// accessLogged reports whether r's server may write an access log entry
// for it: false only when the server has no access logs at all (no log
// directive), the case Caddy's own check (Server.shouldLogRequest) turns
// down first. The fields are then left out: setting them costs an
// allocation or two on every request (ExtraLogFields.Set clears a
// sync.Map), for an entry no one writes.
func accessLogged(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return !ok || srv.Logs != nil
}

// accessLogFields is a settled request's part of its access log entry:
// modelgate_provider, modelgate_model, modelgate_tokens_in, _out and
// _cached, modelgate_fallback (the targets tried), modelgate_cost (dollars,
// or "unpriced"), modelgate_key and modelgate_owner (when a key called) and
// modelgate_ttft_ms (streams). It is one field that zap writes inline,
// named "modelgate" only so that setting it again replaces it: Caddy's
// ExtraLogFields clears a cache on every Set, so one Set rather than ten,
// and nothing is formatted unless an access log writes the entry (after the
// request, when the meter no longer changes).
type accessLogFields meter

func (f *accessLogFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	m := (*meter)(f)
	u := m.usage
	enc.AddString("modelgate_provider", m.provider.name)
	enc.AddString("modelgate_model", m.model)
	enc.AddInt64("modelgate_tokens_in", u.Prompt+u.Embedding)
	enc.AddInt64("modelgate_tokens_out", u.Completion)
	enc.AddInt64("modelgate_tokens_cached", u.Cached)
	if err := enc.AddArray("modelgate_fallback", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
		for _, t := range m.tried {
			a.AppendString(t.String())
		}
		return nil
	})); err != nil {
		return err
	}
	enc.AddString("modelgate_cost", m.costText())
	if m.key != nil {
		enc.AddString("modelgate_key", m.key.Name)
		enc.AddString("modelgate_owner", m.key.Owner)
	}
	if !m.firstByte.IsZero() {
		enc.AddInt64("modelgate_ttft_ms", m.firstByte.Sub(m.start).Milliseconds())
	}
	return nil
}

// pricing is the usage as the price table reads it.
func (u usageInfo) pricing() pricing.Usage {
	return pricing.Usage{PromptTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		CacheWrite1hTokens: u.CacheWrite1h, CompletionTokens: u.Completion, Searches: u.Searches, EmbeddingTokens: u.Embedding}
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
