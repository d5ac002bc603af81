package caddygateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// This file puts limits, budgets and usage on the request path (see docs/design/admission.md): before a request reaches a provider its key and the key's owner
// are admitted by the quota engine (quota/), which checks and counts every
// rate limit and reserves the estimated cost from every budget at once;
// after it, the reservation gives way to what the answer cost, and the
// usage records (usage/) count it.

// usagePrefix is where the usage records live in the app's storage.
const usagePrefix = "modelgate/usage"

// provisionQuota makes the usage recorder and the quota engine on the
// app's storage and state. With a shared state, the engine leases large
// limits and budgets to this instance in slices (quota.Leasing), and a
// second engine on an in-process state stands by: while the shared one
// cannot be reached, limits and budgets count within what this instance
// holds, then on this instance alone, rather than not at all.
func (a *App) provisionQuota() error {
	id, err := caddy.InstanceID()
	if err != nil {
		return fmt.Errorf("usage: instance ID: %v", err)
	}
	a.usage, err = usage.New(a.storage, usage.Options{Instance: id.String(), Prefix: usagePrefix, Logger: a.logger.Named("usage")})
	if err != nil {
		return fmt.Errorf("usage: %v", err)
	}
	qc := quota.Config{State: a.state, Spender: a.usage}
	if a.stateShared {
		qc.Lease, qc.Logger = a.Limits.leasing(), a.logger.Named("limits")
	}
	if a.quota, err = quota.New(qc); err != nil {
		return fmt.Errorf("limits: %v", err)
	}
	if a.stateShared {
		v, _, err := localStates.LoadOrNew(a.storageID+"#standby", func() (caddy.Destructor, error) {
			return localState{state.NewLocal()}, nil
		})
		if err != nil {
			return err
		}
		prev := a.closeState
		a.closeState = func() error {
			_, _ = localStates.Delete(a.storageID + "#standby")
			return prev()
		}
		if a.standbyQuota, err = quota.New(quota.Config{State: v.(localState).State, Spender: standbySpender{a}}); err != nil {
			return fmt.Errorf("limits: %v", err)
		}
	}
	return a.Limits.provision()
}

// errStateDown is what the standby's budgets are told while the shared
// state is known unreachable.
var errStateDown = errors.New("the shared state and its storage are unreachable: the usage records cannot be read")

// standbySpender gives the standby engine's budgets the usage records,
// except while the shared state is known unreachable: the records are in
// its storage, on the same Redis, and reading them would make every
// budgeted request wait the storage's timeout, several times over (8 s and
// more with Redis hanging), only to fail. It fails at once instead, and the
// request is served without its budget, as when the records cannot be read
// (see admitQuota).
type standbySpender struct{ a *App }

func (s standbySpender) Spent(ctx context.Context, by usage.Dimension, id string, from, to time.Time) (pricing.Money, error) {
	if s.a.health.stateDown.Load() {
		return 0, errStateDown
	}
	return s.a.usage.Spent(ctx, by, id, from, to)
}

// countedAs is the id key is counted under in the usage records and the
// limits: a managed key's id, or "static:<name>" for a static key (managed
// key ids never hold a colon).
func (k *Key) countedAs() string {
	if k.ID != "" {
		return k.ID
	}
	return "static:" + k.Name
}

// subjects are what key's requests count against: the key, under its own
// policy or the configured one, and its owner.
func (a *App) subjects(key *Key) quota.Subjects {
	s := quota.Subjects{Key: quota.Subject{ID: key.countedAs(), Name: key.Name}}
	lc := a.Limits
	kp := lc.keyPolicy(key)
	s.Key.Limits, s.Key.Budget = quotaLimits(kp.Limits), lc.budget(kp.Budget)
	if key.Owner != "" {
		op := a.ownerPolicy(key)
		s.Owner = quota.Subject{ID: key.Owner, Name: key.Owner, Limits: quotaLimits(op.Limits), Budget: lc.budget(op.Budget)}
	}
	return s
}

func quotaLimits(l *keys.Limits) quota.Limits {
	if l == nil {
		return quota.Limits{}
	}
	return quota.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute, Concurrent: l.ConcurrentRequests}
}

// budget converts a validated budget; the amounts of the configured ones
// are parsed once, at provision.
func (lc *LimitsConfig) budget(b *keys.Budget) quota.Budget {
	if b == nil {
		return quota.Budget{}
	}
	if lc != nil {
		if qb, ok := lc.parsed[*b]; ok {
			return qb
		}
	}
	amount, err := pricing.ParseMoney(b.USD)
	if err != nil {
		return quota.Budget{} // refused by ValidatePolicy before it is stored
	}
	return quota.Budget{Amount: amount, Period: quota.Period(b.Period)}
}

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

// admitRequest admits a request the gateway answers itself at endpoint e
// (a file upload), by the limits of its key and owner, as admitQuota
// admits a call, or refuses it, answering the client. done settles it.
func (a *App) admitRequest(w http.ResponseWriter, r *http.Request, key *Key, e endpoint) (done func(), ok bool) {
	ad, ok := a.admitQuota(w, r, key, &call{endpoint: e}, nil)
	if !ok {
		return nil, false
	}
	return func() { ad.done(r.Context(), nil, 0, true) }, true
}

// enforced reports whether s has anything to check: a request of a key
// and owner without limits or budgets costs the state nothing.
func enforced(s *quota.Subjects) bool {
	return s.Key.Limits != (quota.Limits{}) || s.Key.Budget.Amount > 0 ||
		s.Owner.Limits != (quota.Limits{}) || s.Owner.Budget.Amount > 0
}

// budgeted reports whether the key or the owner of s has a budget.
func budgeted(s *quota.Subjects) bool { return s.Key.Budget.Amount > 0 || s.Owner.Budget.Amount > 0 }

// estimated reports whether a limit or a budget of s counts what a
// request is expected to use: tokens per minute, or a budget.
func estimated(s *quota.Subjects) bool {
	return s.Key.Limits.TokensPerMinute > 0 || s.Owner.Limits.TokensPerMinute > 0 || budgeted(s)
}

// batchLineKey marks the context of a batch line's request: it counts
// against budgets, not against rate limits.
type batchLineKey struct{}

// admission is a request's admission by the quota engine: done is called
// once, when it ends. The zero admission admits without counting.
type admission struct {
	adm *quota.Admission
	est estimate
}

// admitQuota admits a request of key (live, or a batch line) or refuses
// it, answering the client. It returns the zero admission and true when
// nothing applies. (An admission is a value: it travels in the settling
// closure without an allocation of its own.)
func (a *App) admitQuota(w http.ResponseWriter, r *http.Request, key *Key, c *call, targets []target) (admission, bool) {
	if key == nil || a.quota == nil {
		return admission{}, true
	}
	s := a.subjects(key)
	if c.endpoint.free {
		s = requestsOnly(s)
	}
	batchLine := r.Context().Value(batchLineKey{}) != nil
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
		est = a.estimateCall(c, targets)
		if !est.priced && budgeted(&s) && !a.Limits.allowUnpriced() {
			if a.dispatch != nil && a.dispatch.byDefault(c.model) {
				// Neither the configuration nor the price table knows
				// the model: it is not found, as for a key without a
				// budget the default provider would most likely say.
				writeEndpointError(w, c.endpoint, "", modelNotFound(c.model))
				return admission{}, false
			}
			refuseUnpriced(w, c, key, s)
			return admission{}, false
		}
	}
	ask := quota.Ask{EstimatedTokens: est.tokens, EstimatedCost: est.cost, Rate: !batchLine}
	q := a.quota
	var adm *quota.Admission
	var ref *quota.Refusal
	var err error
	if a.standbyQuota != nil && a.health.stateDown.Load() {
		// Known to be unreachable (watchState, or an earlier request):
		// what this instance holds of the limits, else the standby at
		// once, rather than each request waiting for its own failure,
		// which takes the whole command timeout when Redis hangs.
		if adm = a.quota.AdmitHeld(s, ask); adm == nil {
			q = a.standbyQuota
		}
	}
	if adm == nil {
		adm, ref, err = q.Admit(r.Context(), s, ask)
	}
	if err != nil && q != a.standbyQuota && a.standbyQuota != nil {
		if StorageUnreachable(err) {
			a.setStateDown(true, err) // until watchState's next ping says otherwise
		}
		a.warnQuota(err)
		adm, ref, err = a.standbyQuota.Admit(r.Context(), s, ask)
	}
	if err != nil {
		// Nothing can count (the state and the usage records are
		// unreachable): the request is served, and the log says so.
		a.warnQuota(err)
		return admission{}, true
	}
	if ref != nil {
		a.refuse(w, c, ref)
		return admission{}, false
	}
	if !batchLine {
		if c.endpoint.apiOf() == messagesAPI {
			adm.Headers().SetAnthropic(w.Header(), time.Now())
		} else {
			adm.Headers().SetOpenAI(w.Header())
		}
	}
	return admission{adm: adm, est: est}, true
}

// refuse answers a request over a limit or a budget: 429 in the shape of
// the request's API, with its headers.
func (a *App) refuse(w http.ResponseWriter, c *call, ref *quota.Refusal) {
	metrics.refusals.WithLabelValues(ref.Limit.String(), ref.Subject.String()).Inc()
	api := c.endpoint.apiOf()
	if api == messagesAPI {
		ref.SetAnthropicHeaders(w.Header(), time.Now())
	} else {
		ref.SetOpenAIHeaders(w.Header())
	}
	writeEndpointError(w, c.endpoint, "", &providers.Error{Status: http.StatusTooManyRequests,
		Type: ref.Type(), Code: ref.Code(), Message: ref.Message()})
}

// refuseUnpriced refuses a request of a model without a price by a key
// or owner with a budget: the budget could not count what it spends.
func refuseUnpriced(w http.ResponseWriter, c *call, key *Key, s quota.Subjects) {
	scope, who := "key", "key "+strconv.Quote(key.Name)
	if s.Key.Budget.Amount == 0 {
		scope, who = "owner", "owner "+strconv.Quote(key.Owner)
	}
	metrics.refusals.WithLabelValues("unpriced", scope).Inc()
	writeEndpointError(w, c.endpoint, "", &providers.Error{Status: http.StatusForbidden, Type: "invalid_request_error",
		Code: "model_not_priced", Param: "model",
		Message: fmt.Sprintf("the model %q has no price, and the budget of %s could not count what it spends: use a priced model, or ask the gateway's operator to price this one", c.model, who)})
}

var lastQuotaWarning atomic.Int64

// warnQuota logs, at most every 10 seconds, that limits could not be
// checked.
func (a *App) warnQuota(err error) {
	now := time.Now().UnixMilli()
	if last := lastQuotaWarning.Load(); now-last < 10_000 || !lastQuotaWarning.CompareAndSwap(last, now) {
		return
	}
	msg := "limits and budgets cannot be checked; the request is served without them"
	if a.standbyQuota != nil {
		msg = "the shared state is unreachable: limits and budgets count on this instance only"
	}
	a.logger.Warn(msg, zap.Error(err))
}

// done settles an admission with what the request used: its actual tokens
// and cost (the estimate when the answer said nothing, so a budget is not
// passed by answers without usage). m is nil when no provider answered.
func (ad admission) done(ctx context.Context, m *meter, cost pricing.Money, priced bool) {
	if ad.adm == nil {
		return
	}
	actual := quota.Actual{}
	switch {
	case m == nil: // nothing answered: nothing spent
		actual.Priced = true
	case m.usage.Known:
		actual = quota.Actual{Tokens: m.usage.total(), Cost: cost, Priced: priced}
	default:
		actual = quota.Actual{Tokens: ad.est.tokens, Cost: ad.est.cost, Priced: ad.est.priced}
	}
	_ = ad.adm.Done(ctx, actual) // which goes on when ctx is cancelled
}

// recordUsage counts a request a provider answered in the usage records,
// under the day it was admitted on.
func (a *App) recordUsage(key *Key, m *meter, ad admission, cost pricing.Money, priced bool) {
	if a.usage == nil || key == nil || m == nil {
		return
	}
	at := m.start
	if ad.adm != nil {
		at = ad.adm.At()
	}
	u := m.usage
	c := usage.Counts{Requests: 1, InputTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		OutputTokens: u.Completion, ReasoningTokens: u.Reasoning, Searches: u.Searches, EmbeddingTokens: u.Embedding}
	if priced {
		c.Cost = cost
	} else {
		c.Unpriced = 1
	}
	a.usage.Add(usage.Bucket{KeyID: key.countedAs(), KeyName: key.Name, Owner: key.Owner, Model: m.model,
		Provider: m.provider.name, ProviderType: m.provider.typ, Day: usage.DayOf(at)}, c)
}

// Usage sums the usage records over q: every instance's, with what this
// instance counted since its last flush.
func (a *App) Usage(ctx context.Context, q usage.Query) (usage.Report, error) {
	if a.usage == nil {
		return usage.Report{}, errors.New("usage is not recorded")
	}
	return a.usage.Query(ctx, q)
}

// KeyStatus tells how the managed key k stands against its limits and
// budget and its owner's (its own policy, else the configured one): what
// is left now, and of the budgets what is spent, reserved and left.
func (a *App) KeyStatus(ctx context.Context, k keys.Key) (quota.Status, error) {
	if a.quota == nil {
		return quota.Status{}, errors.New("limits are not checked")
	}
	s := a.subjects(&Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Limits: k.Limits, Budget: k.Budget})
	st, err := a.quota.Status(ctx, s)
	if err != nil && a.standbyQuota != nil {
		st, err = a.standbyQuota.Status(ctx, s)
	}
	return st, err
}

// EffectivePolicy is the policy that applies to the managed key k and to
// its owner: its own limits and budget where it has them, else the
// configured ones.
func (a *App) EffectivePolicy(k keys.Key) (key, owner keys.Policy) {
	mk := &Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Limits: k.Limits, Budget: k.Budget}
	key = a.Limits.keyPolicy(mk)
	if k.Owner != "" {
		owner = a.ownerPolicy(mk)
	}
	return key, owner
}
