package caddygateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// This file wires limits, budgets and usage for the gateway, which puts
// them on the request path (gateway/admission.go,
// docs/design/admission.md): the usage records (usage/) and the quota
// engine (quota/) on the app's storage and state, the standby engine, the
// policies of keys and owners, and the usage and standing the admin API
// and the key settings page show.

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
		return fmt.Errorf("usage: instance ID: %w", err)
	}
	a.usage, err = usage.New(a.storage, usage.Options{Instance: id.String(), Prefix: usagePrefix, Logger: a.logger.Named("usage")})
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	qc := quota.Config{State: a.state, Spender: a.usage, Shared: a.stateShared}
	if a.stateShared {
		qc.Lease, qc.Logger = a.Limits.leasing(), a.logger.Named("limits")
	}
	if a.quota, err = quota.New(qc); err != nil {
		return fmt.Errorf("limits: %w", err)
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
			return fmt.Errorf("limits: %w", err)
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
// (gateway/admission.go).
type standbySpender struct{ a *App }

func (s standbySpender) Spent(ctx context.Context, by usage.Dimension, id string, from, to time.Time) (pricing.Money, error) {
	if s.a.health.stateDown.Load() {
		return 0, errStateDown
	}
	return s.a.usage.Spent(ctx, by, id, from, to)
}

// policies are the gateway's Policies of an app: its configured limits,
// and the ceilings of an account for its members' keys.
type policies struct{ a *App }

// Subjects are what key's requests count against (gateway.Policies).
func (p policies) Subjects(key *Key) quota.Subjects { return p.a.subjects(key) }

// AllowsUnpriced reports whether budgeted keys may use unpriced models
// (gateway.Policies).
func (p policies) AllowsUnpriced() bool { return p.a.Limits.allowUnpriced() }

// subjects are what key's requests count against: the key, under its own
// policy or the configured one, and its owner (an account's ceilings, or
// the configured owner policy).
func (a *App) subjects(key *Key) quota.Subjects {
	lc := a.Limits
	s := quota.Subjects{Key: quota.Subject{ID: key.CountedAs(), Name: key.Name}}
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

// admitRequest admits a request the gateway answers itself at api (a file
// upload), by the limits of its key and owner, as the gateway admits a
// call, or refuses it, answering the client. done settles it.
func (a *App) admitRequest(w http.ResponseWriter, r *http.Request, key *Key, api gateway.API) (done func(), ok bool) {
	o := &gateway.Outcome{Header: w.Header()}
	if done, ok = a.gw.Admit(r.Context(), key, api, o); !ok {
		writeAPIError(w, api, o.Err)
		observeRequest(api.String(), "", o.Status)
	}
	return done, ok
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
