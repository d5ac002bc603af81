package caddygateway

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
)

// LimitsConfig sets the rate limits and budgets of keys and owners
// (see docs/design/admission.md). A managed key's own limits and budget (set when it is
// created or with PATCH /modelgate/keys/{id}) win over Keys and Key; an
// owner in Owners over Owner. A key's request counts against both its own
// limits and its owner's.
type LimitsConfig struct {
	// Key is the policy of every key that has none of its own. Default:
	// no limits, no budget.
	Key *keys.Policy `json:"key,omitempty"`

	// Keys are the policies of static keys, by name.
	Keys map[string]*keys.Policy `json:"keys,omitempty"`

	// Owner is the policy of every owner not in Owners. Default: no
	// limits, no budget.
	Owner *keys.Policy `json:"owner,omitempty"`

	// Owners are the policies of owners (teams), by name.
	Owners map[string]*keys.Policy `json:"owners,omitempty"`

	// AllowUnpriced lets keys and owners with a budget use models the
	// price table has no price for; their requests then count nothing
	// against the budget (they are recorded as unpriced). Default: such
	// requests are refused (403 model_not_priced), since a budget could
	// not count what they spend.
	AllowUnpriced bool `json:"allow_unpriced,omitempty"`

	// Leases tunes how an instance of a cluster holds slices of the
	// limits and budgets it shares with the others (see
	// docs/design/leases.md). Default: leased, with the defaults below.
	Leases *LeasesConfig `json:"leases,omitempty"`

	parsed map[keys.Budget]quota.Budget // the configured budgets, parsed
}

// LeasesConfig tunes the leases of the limits and budgets instances share
// on Redis: large ones are leased to each instance in slices, so that a
// request costs no round trip; small ones are counted one by one. On one
// instance (the in-process state) nothing is leased.
type LeasesConfig struct {
	// Off counts every request of a limit or budget one by one in the
	// shared state, as exactly as the limit allows, at a round trip to
	// Redis to admit it and one to settle it.
	Off bool `json:"off,omitempty"`
	// Life is how long the slices of budgets and concurrency an instance
	// held outlive it when it dies (a budget's: up to twice that and a
	// second).
	// Default: 10s.
	Life caddy.Duration `json:"life,omitempty"`
	// Share: a slice holds at most 1/share of a limit. Default: 16.
	Share int64 `json:"share,omitempty"`
	// Horizon: a slice holds about this long of the instance's recent
	// use. Default: 250ms.
	Horizon caddy.Duration `json:"horizon,omitempty"`
	// Idle: a slice unused this long is given back. Default: 1s.
	Idle caddy.Duration `json:"idle,omitempty"`
}

// leasing is the quota engine's lease configuration: nil when off.
func (lc *LimitsConfig) leasing() *quota.Leasing {
	if lc == nil || lc.Leases == nil {
		return &quota.Leasing{}
	}
	l := lc.Leases
	if l.Off {
		return nil
	}
	return &quota.Leasing{Life: time.Duration(l.Life), Share: l.Share, Horizon: time.Duration(l.Horizon), Idle: time.Duration(l.Idle)}
}

// allowUnpriced reports whether budgeted keys may use unpriced models.
func (lc *LimitsConfig) allowUnpriced() bool { return lc != nil && lc.AllowUnpriced }

// provision parses the configured budgets once.
func (lc *LimitsConfig) provision() error {
	if lc == nil {
		return nil
	}
	lc.parsed = make(map[keys.Budget]quota.Budget)
	add := func(p *keys.Policy) error {
		if p == nil || p.Budget == nil {
			return nil
		}
		amount, err := pricing.ParseMoney(p.Budget.USD)
		if err != nil {
			return fmt.Errorf("limits: budget %q: %w", p.Budget.USD, err)
		}
		lc.parsed[*p.Budget] = quota.Budget{Amount: amount, Period: quota.Period(p.Budget.Period)}
		return nil
	}
	for _, p := range append([]*keys.Policy{lc.Key, lc.Owner}, append(mapValues(lc.Keys), mapValues(lc.Owners)...)...) {
		if err := add(p); err != nil {
			return err
		}
	}
	return nil
}

func mapValues(m map[string]*keys.Policy) []*keys.Policy {
	out := make([]*keys.Policy, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// keyPolicy is the policy that applies to key: its own (a managed key's),
// its static key entry, else the default for keys.
func (lc *LimitsConfig) keyPolicy(k *Key) keys.Policy {
	var p keys.Policy
	if lc != nil {
		if lc.Key != nil {
			p = *lc.Key
		}
		if k.ID == "" {
			if kp := lc.Keys[k.Name]; kp != nil {
				p = *kp
			}
		}
	}
	if k.Limits != nil {
		p.Limits = k.Limits
	}
	if k.Budget != nil {
		p.Budget = k.Budget
	}
	return p
}

// ownerPolicy is the policy of owner: its own entry, else the default.
func (lc *LimitsConfig) ownerPolicy(owner string) keys.Policy {
	if lc == nil {
		return keys.Policy{}
	}
	if p := lc.Owners[owner]; p != nil {
		return *p
	}
	if lc.Owner != nil {
		return *lc.Owner
	}
	return keys.Policy{}
}

// validate checks every policy as a managed key's would be.
func (lc *LimitsConfig) validate() error {
	if lc == nil {
		return nil
	}
	check := func(where string, p *keys.Policy) error {
		if p == nil {
			return nil
		}
		if err := keys.ValidatePolicy(*p); err != nil {
			return fmt.Errorf("limits %s: %w", where, err)
		}
		return nil
	}
	if err := check("key", lc.Key); err != nil {
		return err
	}
	if err := check("owner", lc.Owner); err != nil {
		return err
	}
	for name, p := range lc.Keys {
		if err := check("key "+name, p); err != nil {
			return err
		}
	}
	for name, p := range lc.Owners {
		if err := check("owner "+name, p); err != nil {
			return err
		}
	}
	return nil
}

// unmarshalLimits reads the limits { … } block. Syntax:
//
//	limits {
//	    key   [<static key name>] [rpm <n>] [tpm <n>] [concurrent <n>] [budget <usd> day|month|total]
//	    owner [<owner>]           [rpm <n>] [tpm <n>] [concurrent <n>] [budget <usd> day|month|total]
//	    allow_unpriced
//	    leases off
//	    leases {
//	        life    <duration>
//	        share   <n>
//	        horizon <duration>
//	        idle    <duration>
//	    }
//	}
//
// A line without a name sets the default for keys (or owners). rpm is also
// requests_per_minute, tpm tokens_per_minute.
func (lc *LimitsConfig) unmarshalLimits(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		scope := d.Val()
		switch scope {
		case "allow_unpriced":
			if d.NextArg() {
				return d.ArgErr()
			}
			lc.AllowUnpriced = true
			continue
		case "leases":
			if err := lc.unmarshalLeases(d); err != nil {
				return err
			}
			continue
		}
		if scope != "key" && scope != "owner" {
			return d.Errf("limits: %q is not key, owner, allow_unpriced or leases", scope)
		}
		args := d.RemainingArgs()
		name := ""
		if len(args) > 0 && !isLimitSetting(args[0]) {
			name, args = args[0], args[1:]
		}
		if len(args) == 0 {
			return d.Errf("limits %s %s: no limit or budget given", scope, name)
		}
		p, err := parsePolicy(args)
		if err != nil {
			return d.Errf("limits %s %s: %v", scope, name, err)
		}
		if err := lc.set(scope, name, p); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// unmarshalLeases reads "leases off" or a leases { … } block.
func (lc *LimitsConfig) unmarshalLeases(d *caddyfile.Dispenser) error {
	if lc.Leases != nil {
		return d.Err("limits: leases is given twice")
	}
	lc.Leases = new(LeasesConfig)
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("limits: leases %q: give off, or a block", d.Val())
		}
		lc.Leases.Off = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		setting := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		var dst *caddy.Duration
		switch setting {
		case "share":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 {
				return d.Errf("limits: leases share %q is not a whole number of 1 or more", val)
			}
			lc.Leases.Share = n
			continue
		case "life":
			dst = &lc.Leases.Life
		case "horizon":
			dst = &lc.Leases.Horizon
		case "idle":
			dst = &lc.Leases.Idle
		default:
			return d.Errf("limits: leases: %q is not life, share, horizon or idle", setting)
		}
		v, err := caddy.ParseDuration(val)
		if err != nil || v <= 0 {
			return d.Errf("limits: leases %s %q is not a positive duration", setting, val)
		}
		*dst = caddy.Duration(v)
	}
	return nil
}

// set puts p in its place: the default of scope ("key" or "owner") when
// name is empty, else name's entry.
func (lc *LimitsConfig) set(scope, name string, p keys.Policy) error {
	if name == "" {
		slot := &lc.Key
		if scope == "owner" {
			slot = &lc.Owner
		}
		if *slot != nil {
			return fmt.Errorf("limits %s (the default) is given twice", scope)
		}
		*slot = &p
		return nil
	}
	m := &lc.Keys
	if scope == "owner" {
		m = &lc.Owners
	}
	if *m == nil {
		*m = map[string]*keys.Policy{}
	}
	if (*m)[name] != nil {
		return fmt.Errorf("limits %s %s is given twice", scope, name)
	}
	(*m)[name] = &p
	return nil
}

func isLimitSetting(s string) bool {
	switch s {
	case "rpm", "requests_per_minute", "tpm", "tokens_per_minute", "concurrent", "concurrent_requests", "budget":
		return true
	}
	return false
}

// parsePolicy reads settings such as "rpm 60 tpm 1000 budget 25 month".
func parsePolicy(args []string) (keys.Policy, error) {
	var p keys.Policy
	limits := func() *keys.Limits {
		if p.Limits == nil {
			p.Limits = new(keys.Limits)
		}
		return p.Limits
	}
	for i := 0; i < len(args); i++ {
		setting := args[i]
		if !isLimitSetting(setting) {
			return p, fmt.Errorf("unknown setting %q (rpm, tpm, concurrent, budget)", setting)
		}
		need := 1
		if setting == "budget" {
			need = 2
		}
		if i+need > len(args)-1 {
			return p, fmt.Errorf("%s needs %d value(s)", setting, need)
		}
		if setting == "budget" {
			p.Budget = &keys.Budget{USD: args[i+1], Period: args[i+2]}
			i += 2
			continue
		}
		n, err := strconv.ParseInt(args[i+1], 10, 64)
		if err != nil || n < 0 {
			return p, fmt.Errorf("%s: %q is not a whole number", setting, args[i+1])
		}
		switch setting {
		case "rpm", "requests_per_minute":
			limits().RequestsPerMinute = n
		case "tpm", "tokens_per_minute":
			limits().TokensPerMinute = n
		default: // concurrent, concurrent_requests
			limits().ConcurrentRequests = n
		}
		i++
	}
	return p, keys.ValidatePolicy(p)
}
