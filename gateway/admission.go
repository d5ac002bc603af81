package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/respcache"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// This file puts limits, budgets and usage on the request path
// (docs/design/admission.md): before a request reaches a provider its key
// and the key's owner are admitted by the quota engine (quota/), which
// checks and counts every rate limit and reserves the estimated cost from
// every budget at once; after it, the reservation gives way to what the
// answer cost, and the usage records (usage/) count it.

// requestsOnly is what a request that costs nothing (a free endpoint:
// count_tokens, a file upload) counts against of s: the requests per
// minute of the key and of its owner, as every request does; not tokens
// per minute, concurrency or budgets, which measure what requests cost
// and use.
func requestsOnly(s quota.Subjects) quota.Subjects {
	s.Key.Limits = quota.Limits{RequestsPerMinute: s.Key.Limits.RequestsPerMinute}
	s.Owner.Limits = quota.Limits{RequestsPerMinute: s.Owner.Limits.RequestsPerMinute}
	s.Key.Budget, s.Owner.Budget = quota.Budget{}, quota.Budget{}
	return s
}

// Admit admits a request the host answers itself at api (a file upload),
// by the limits of its key and owner, as a call is admitted, or refuses it
// (o says why). done settles it.
func (g *Gateway) Admit(ctx context.Context, key *Key, a API, o *Outcome) (done func(), ok bool) {
	if o.Header == nil {
		o.Header = make(http.Header)
	}
	ad, ok := g.admit(ctx, &Call{API: a, Key: key}, o, &request{endpoint: endpointOf(a)}, nil)
	if !ok {
		return nil, false
	}
	return func() { ad.done(ctx, nil) }, true
}

// enforced reports whether s has anything to check: a request of a key
// and owner without limits or budgets costs the state nothing.
func enforced(s *quota.Subjects) bool {
	return s.Key.Limits != (quota.Limits{}) || s.Key.Budget.Amount > 0 ||
		s.Owner.Limits != (quota.Limits{}) || s.Owner.Budget.Amount > 0
}

// rateLimited reports whether the key or the owner of s has a rate or
// concurrency limit.
func rateLimited(s *quota.Subjects) bool {
	return s.Key.Limits != (quota.Limits{}) || s.Owner.Limits != (quota.Limits{})
}

// budgeted reports whether the key or the owner of s has a budget.
func budgeted(s *quota.Subjects) bool { return s.Key.Budget.Amount > 0 || s.Owner.Budget.Amount > 0 }

// estimated reports whether a limit or a budget of s counts what a
// request is expected to use: tokens per minute, or a budget.
func estimated(s *quota.Subjects) bool {
	return s.Key.Limits.TokensPerMinute > 0 || s.Owner.Limits.TokensPerMinute > 0 || budgeted(s)
}

// admission is a call's admission by the quota engine: done is called
// once, when it ends. The zero admission admits without counting.
type admission struct {
	adm *quota.Admission
	// rate is the standby's admission of the rate limits of a call whose
	// budgets adm took from the slices this instance holds, while the
	// shared state is unreachable (admitSplit); nil otherwise.
	rate *quota.Admission
	est  estimate
}

// admit admits a call of its key (live, or a batch line) or refuses it
// (o says why). It returns the zero admission and true when nothing
// applies. A batch line counts against budgets, not rate limits: the
// batch engine paces itself.
func (g *Gateway) admit(ctx context.Context, c *Call, o *Outcome, rq *request, targets []Target) (admission, bool) {
	key := c.Key
	if key == nil || g.limits.Quota == nil || g.limits.Policies == nil {
		return admission{}, true
	}
	s := g.limits.Policies.Subjects(key)
	if rq.endpoint.free {
		s = requestsOnly(s)
	}
	batchLine := c.Batch != nil
	if batchLine {
		s.Key.Limits, s.Owner.Limits = quota.Limits{}, quota.Limits{}
	}
	if !enforced(&s) {
		return admission{}, true
	}
	// Only tokens per minute and budgets count what a request is expected
	// to use; limits of requests and of concurrency need no estimate.
	var est estimate
	if estimated(&s) {
		est = g.estimateCall(rq, targets)
		if !est.priced && budgeted(&s) && !g.limits.Policies.AllowsUnpriced() {
			if g.routes.byDefault(rq.model) {
				// Neither the configuration nor the price table knows
				// the model: it is not found, as for a key without a
				// budget the default provider would most likely say.
				o.fail(rq.endpoint.apiOf(), modelNotFound(rq.model))
				return admission{}, false
			}
			g.refuseUnpriced(o, rq, key, s)
			return admission{}, false
		}
	}
	ask := quota.Ask{EstimatedTokens: est.tokens, EstimatedCost: est.cost, Rate: !batchLine}
	q, standby := g.limits.Quota, g.limits.Standby
	var adm, rate *quota.Admission
	var ref *quota.Refusal
	var err error
	down := standby != nil && g.limits.StateDown != nil && g.limits.StateDown()
	if down {
		// Known to be unreachable (the host's watch, or an earlier
		// request): what this instance holds of the limits, else the
		// standby at once, rather than each request waiting for its own
		// failure, which takes the whole command timeout when Redis hangs.
		adm = q.AdmitHeld(s, ask)
	} else {
		adm, ref, err = q.Admit(ctx, s, ask)
		if err != nil && standby != nil {
			if StorageUnreachable(err) && g.limits.SetStateDown != nil {
				g.limits.SetStateDown(err) // until the host's next check says otherwise
			}
			g.warnQuota(err)
			adm, down = nil, true
		}
	}
	if adm == nil && down {
		adm, rate, ref, err = admitSplit(ctx, q, standby, s, ask)
	}
	if err != nil {
		// Nothing can count (the state and the usage records are
		// unreachable): the request is served, and the log says so.
		g.warnQuota(err)
		return admission{}, true
	}
	if ref != nil {
		g.refuse(o, rq, ref)
		return admission{}, false
	}
	if !batchLine {
		h := adm.Headers()
		if rate != nil {
			h = rate.Headers()
		}
		if rq.endpoint.apiOf() == messagesAPI {
			h.SetAnthropic(o.Header, time.Now())
		} else {
			h.SetOpenAI(o.Header)
		}
	}
	return admission{adm: adm, rate: rate, est: est}, true
}

// admitSplit admits a call on the standby while the shared state is
// unreachable and the slices this instance holds do not cover it. When
// they cover its budgets but not its rate limits — a rate limit's slice
// is of one minute's window, and is of no use once the minute has turned;
// or it ran out — the budgets are taken from their slices, whose spend
// reaches the shared state once it is back, and the standby counts the
// rate limits alone (adm: the budgets', rate: the standby's). Otherwise
// the standby counts it all, and what it spends never reaches the
// shared state's budgets (rate is nil).
func admitSplit(ctx context.Context, q, standby *quota.Quota, s quota.Subjects, ask quota.Ask) (adm, rate *quota.Admission, ref *quota.Refusal, err error) {
	var held *quota.Admission
	if ask.Rate && budgeted(&s) && rateLimited(&s) {
		budgets := ask
		budgets.Rate = false
		held = q.AdmitHeld(s, budgets)
	}
	if held == nil {
		adm, ref, err = standby.Admit(ctx, s, ask)
		return adm, nil, ref, err
	}
	limits := s
	limits.Key.Budget, limits.Owner.Budget = quota.Budget{}, quota.Budget{}
	rate, ref, err = standby.Admit(ctx, limits, ask)
	if rate == nil {
		// Refused, or not counted: the budgets' reservation goes back,
		// nothing spent.
		_ = held.Done(ctx, quota.Actual{Priced: true})
		return nil, nil, ref, err
	}
	return held, rate, nil, nil
}

// refuse answers a request over a limit or a budget: 429 in the shape of
// the request's API, with its headers, and whether and when retrying can
// succeed.
func (g *Gateway) refuse(o *Outcome, rq *request, ref *quota.Refusal) {
	g.obs.Refused(ref.Limit.String(), ref.Subject.String())
	a := rq.endpoint.apiOf()
	if a == messagesAPI {
		ref.SetAnthropicHeaders(o.Header, time.Now())
	} else {
		ref.SetOpenAIHeaders(o.Header)
	}
	o.fail(a, &providers.Error{Status: http.StatusTooManyRequests, Type: ref.Type(), Code: ref.Code(), Message: ref.Message()})
	o.Retryable = ref.Retryable()
	if ref.RetryAfter > 0 {
		// What retry-after-ms says: whole milliseconds, rounded up.
		o.RetryAfter = max(time.Millisecond, (ref.RetryAfter + time.Millisecond - 1).Truncate(time.Millisecond))
	}
}

// refuseUnpriced refuses a request of a model without a price by a key
// or owner with a budget: the budget could not count what it spends.
func (g *Gateway) refuseUnpriced(o *Outcome, rq *request, key *Key, s quota.Subjects) {
	scope, who := "key", "key "+strconv.Quote(key.Name)
	if s.Key.Budget.Amount == 0 {
		scope, who = "owner", "owner "+strconv.Quote(key.Owner)
	}
	g.obs.Refused("unpriced", scope)
	o.fail(rq.endpoint.apiOf(), &providers.Error{Status: http.StatusForbidden, Type: "invalid_request_error",
		Code: "model_not_priced", Param: "model",
		Message: fmt.Sprintf("the model %q has no price, and the budget of %s could not count what it spends: use a priced model, or ask the gateway's operator to price this one", rq.model, who)})
}

var lastQuotaWarning atomic.Int64

// warnQuota logs, at most every 10 seconds, that limits could not be
// checked.
func (g *Gateway) warnQuota(err error) {
	now := time.Now().UnixMilli()
	if last := lastQuotaWarning.Load(); now-last < 10_000 || !lastQuotaWarning.CompareAndSwap(last, now) {
		return
	}
	msg := "limits and budgets cannot be checked; the request is served without them"
	if g.limits.Standby != nil {
		msg = "the shared state is unreachable: limits and budgets count on this instance only"
	}
	g.log.Warn(msg, zap.Error(err))
}

// done settles an admission with what the call used (o, settled; nil when
// no provider answered): its actual tokens and cost (the estimate when the
// answer said nothing, so a budget is not passed by answers without
// usage).
func (ad admission) done(ctx context.Context, o *Outcome) {
	if ad.adm == nil {
		return
	}
	actual := quota.Actual{}
	switch {
	case o == nil: // nothing answered: nothing spent
		actual.Priced = true
	case o.Usage.Known:
		actual = quota.Actual{Tokens: o.Usage.Total(), Cost: o.Cost, Priced: o.Priced}
	default:
		actual = quota.Actual{Tokens: ad.est.tokens, Cost: ad.est.cost, Priced: ad.est.priced}
	}
	_ = ad.adm.Done(ctx, actual) // which goes on when ctx is cancelled
	_ = ad.rate.Done(ctx, actual)
}

// recordUsage counts a call a provider answered in the usage records,
// under the day it was admitted on.
func (g *Gateway) recordUsage(o *Outcome, ad admission) {
	key := o.Key
	if g.usage == nil || key == nil {
		return
	}
	at := o.Start
	if ad.adm != nil {
		at = ad.adm.At()
	}
	u := o.Usage
	c := usage.Counts{Requests: 1, InputTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		OutputTokens: u.Completion, ReasoningTokens: u.Reasoning, Searches: u.Searches, EmbeddingTokens: u.Embedding}
	if o.Priced {
		c.Cost = o.Cost
	} else {
		c.Unpriced = 1
	}
	if o.Cache == respcache.StatusHit {
		c.CacheHits = 1
	}
	p := o.Target.Provider
	g.usage.Add(usage.Bucket{KeyID: key.CountedAs(), KeyName: key.Name, Owner: key.Owner, Model: o.Target.Model,
		Provider: p.Name, ProviderType: p.Type, Day: usage.DayOf(at)}, c)
}

// StorageUnreachable reports whether err says that the storage (or the
// shared state) could not be reached — a network operation that failed or
// timed out, as with Redis stopped or cut off, or state.ErrUnavailable —
// rather than that it refused or failed the operation. Such a failure is a
// 503 worth retrying shortly, not a 500. (Not every net.Error: a file
// system's syscall.Errno is one too.)
func StorageUnreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, state.ErrUnavailable)
}

// pricingUsage is the usage as the price table reads it.
func pricingUsage(u Usage) pricing.Usage {
	return pricing.Usage{PromptTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		CacheWrite1hTokens: u.CacheWrite1h, CompletionTokens: u.Completion, Searches: u.Searches, EmbeddingTokens: u.Embedding}
}
