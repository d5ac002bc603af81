package caddygateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/gateway"
)

// This file tells Caddy what became of a call (gateway.Outcome): its
// placeholders, and its part of the access log entry.

// outcome is a call's outcome as the request's replacer and its access log
// entry read it.
type outcome gateway.Outcome

// placeholder is the request's replacer's source of the placeholders the
// modelgate handler sets (it maps it before the call is served):
// {http.modelgate.provider} and {http.modelgate.model}, the target being
// tried (after a fallback, the last one tried), and once the call is
// settled what it used: {http.modelgate.tokens_in},
// {http.modelgate.tokens_out}, {http.modelgate.tokens_cached},
// {http.modelgate.cost} (dollars, or "unpriced"), {http.modelgate.fallback}
// (the targets tried, joined by " > ") and, for a stream,
// {http.modelgate.ttft_ms}. Each is formatted when something reads it — an
// access log's log_append, a header, a later handler — rather than stored
// for every request whether read or not.
func (o *outcome) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, "http.modelgate.")
	if !ok {
		return nil, false
	}
	if name == "provider" || name == "model" {
		if len(o.Tried) == 0 {
			return nil, false
		}
		t := o.Tried[len(o.Tried)-1]
		if name == "provider" {
			return t.Provider.Name, true
		}
		return t.Model, true
	}
	if !o.Settled {
		return nil, false
	}
	switch name {
	case "tokens_in":
		return strconv.FormatInt(o.Usage.Prompt+o.Usage.Embedding, 10), true
	case "tokens_out":
		return strconv.FormatInt(o.Usage.Completion, 10), true
	case "tokens_cached":
		return strconv.FormatInt(o.Usage.Cached, 10), true
	case "cost":
		return (*gateway.Outcome)(o).CostText(), true
	case "fallback":
		var b strings.Builder
		for i, t := range o.Tried {
			if i > 0 {
				b.WriteString(" > ")
			}
			b.WriteString(t.String())
		}
		return b.String(), true
	case "ttft_ms":
		if !o.FirstByte.IsZero() {
			return strconv.FormatInt(o.FirstByte.Sub(o.Start).Milliseconds(), 10), true
		}
	}
	return nil, false
}

// logSettled adds a settled call's fields to its request's access log
// entry, where the request's server may write one.
func logSettled(r *http.Request, o *gateway.Outcome) {
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok && accessLogged(r) {
		extra.Set(zap.Field{Key: "modelgate", Type: zapcore.InlineMarshalerType, Interface: (*accessLogFields)(o)})
	}
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

// accessLogFields is a settled call's part of its access log entry:
// modelgate_provider, modelgate_model, modelgate_tokens_in, _out and
// _cached, modelgate_fallback (the targets tried), modelgate_cost (dollars,
// or "unpriced"), modelgate_key and modelgate_owner (when a key called),
// modelgate_ttft_ms (streams) and modelgate_cache (hit, miss or bypass,
// while the response cache is on). It is one field that zap writes inline,
// named "modelgate" only so that setting it again replaces it: Caddy's
// ExtraLogFields clears a cache on every Set, so one Set rather than ten,
// and nothing is formatted unless an access log writes the entry (after the
// request, when the outcome no longer changes).
type accessLogFields gateway.Outcome

func (f *accessLogFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	o := (*gateway.Outcome)(f)
	u := o.Usage
	enc.AddString("modelgate_provider", o.Target.Provider.Name)
	enc.AddString("modelgate_model", o.Target.Model)
	enc.AddInt64("modelgate_tokens_in", u.Prompt+u.Embedding)
	enc.AddInt64("modelgate_tokens_out", u.Completion)
	enc.AddInt64("modelgate_tokens_cached", u.Cached)
	if err := enc.AddArray("modelgate_fallback", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
		for _, t := range o.Tried {
			a.AppendString(t.String())
		}
		return nil
	})); err != nil {
		return err
	}
	enc.AddString("modelgate_cost", o.CostText())
	if o.Key != nil {
		enc.AddString("modelgate_key", o.Key.Name)
		enc.AddString("modelgate_owner", o.Key.Owner)
	}
	if !o.FirstByte.IsZero() {
		enc.AddInt64("modelgate_ttft_ms", o.FirstByte.Sub(o.Start).Milliseconds())
	}
	if o.Cache != "" {
		enc.AddString("modelgate_cache", o.Cache)
	}
	return nil
}
