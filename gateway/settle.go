package gateway

import (
	"context"
)

// This file settles every call a provider answered
// (docs/design/admission.md): what it used is priced from the price table,
// handed to the limits and budgets and counted in the usage records; the
// host's Observer is told (metrics, the access log, placeholders).

// settle prices what a call used, settles its admission and records its
// usage.
func (g *Gateway) settle(ctx context.Context, o *Outcome, rq *request, ad admission) {
	u := pricingUsage(o.Usage)
	switch {
	case rq.endpoint.free:
		o.Cost, o.Priced = 0, true
	case o.Usage.Known && g.prices != nil:
		o.Cost, o.Priced = g.prices.Cost(o.Target.Provider.Type, o.Target.Model, u)
	}
	o.Settled = true
	g.recordUsage(o, ad)
	ad.done(ctx, o)
}
