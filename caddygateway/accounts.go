package caddygateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers"
)

// This file adapts the accounts engine (accounts/) to the app: the
// account records and the audit log live in the app's storage, a change
// reaches the other instances on the shared state's accounts channel,
// every request of a suspended or deleted account's key is refused, an
// account's ceilings are its keys' owner limits, and audit entries are
// emitted as Caddy events.

// AccountsConfig sets up account holders: members and group rules, and
// how long the audit log keeps its entries.
type AccountsConfig struct {
	accounts.Config

	// AuditRetention is how long audit entries are kept. Default: 365
	// days.
	AuditRetention caddy.Duration `json:"audit_retention,omitempty"`
}

// defaultAuditRetention keeps a year of audit entries.
const defaultAuditRetention = 365 * 24 * time.Hour

// channelAccounts carries the id of an account changed on one instance.
const channelAccounts = "accounts"

// provisionAccounts loads the account records of the app's storage and
// sets up the service the key administration works through.
func (a *App) provisionAccounts(ctx context.Context) error {
	cfg := a.Accounts
	if cfg == nil {
		cfg = new(AccountsConfig)
	}
	if cfg.AuditRetention < 0 {
		return fmt.Errorf("accounts: audit_retention must not be negative")
	}
	a.accounts = accounts.NewManager(a.storage, "modelgate")
	a.accounts.Changed = func(id string) { a.publish(channelAccounts, id) }
	a.audit = accounts.NewAuditLog(a.storage, "modelgate")
	a.audit.Retention = time.Duration(cfg.AuditRetention)
	if a.audit.Retention == 0 {
		a.audit.Retention = defaultAuditRetention
	}
	a.audit.Emit = a.emitAudit
	a.service = &accounts.Service{Keys: a.managed, Accounts: a.accounts, Audit: a.audit, Config: cfg.Config,
		Configured: a.Limits.ownerPolicy}
	if err := a.accounts.Refresh(ctx); err != nil {
		a.logger.Error("loading accounts; those that could be read apply, the rest are tried again at each refresh", zap.Error(err))
	}
	return nil
}

// emitAudit emits an audit entry as the event "audit" and logs it; one
// that could not be stored is logged at ERROR, so that it is not lost.
func (a *App) emitAudit(e accounts.Entry, err error) {
	result := "stored"
	if err != nil {
		result = "failed"
		a.logger.Error("an audit entry could not be stored; it is kept in this log line", zap.Error(err),
			zap.Any("entry", e))
	} else {
		a.logger.Info("audit", zap.String("id", e.ID), zap.String("account", e.Account), zap.String("action", e.Action),
			zap.String("target", e.Target.Type+" "+e.Target.ID), zap.String("by", e.Actor.Describe()), zap.String("from", e.Actor.From))
	}
	metrics.audit.WithLabelValues(e.Action, result).Inc()
	var data map[string]any
	if b, jerr := json.Marshal(e); jerr == nil {
		_ = json.Unmarshal(b, &data)
	}
	a.events.Emit(a.ctx, "audit", data)
}

// AccountService returns the accounts service: every change to keys, accounts
// and members made on behalf of an account holder, the operator or
// secret scanning goes through it.
func (a *App) AccountService() *accounts.Service { return a.service }

// refreshAccounts reloads the account records, at key_refresh.
func (a *App) refreshAccounts(ctx context.Context) {
	if err := a.accounts.Refresh(ctx); err != nil && ctx.Err() == nil {
		a.logger.Error("reloading accounts", zap.Error(err))
	}
}

// pruneAudit drops audit entries past the retention, at start and every
// few hours.
func (a *App) pruneAudit(ctx context.Context) {
	n, err := a.audit.Prune(ctx)
	if err != nil && ctx.Err() == nil {
		a.logger.Warn("pruning the audit log", zap.Error(err))
	}
	if n > 0 {
		a.logger.Info("audit log pruned", zap.Int("days_deleted", n))
	}
}

// auditPruneInterval is how often each instance prunes the audit log.
const auditPruneInterval = 6 * time.Hour

// accountBlocked reports whether key belongs to a suspended or deleted
// account: its requests are refused. Static keys belong to no account;
// an app without accounts (one a test built without Provision) blocks
// nothing.
func (a *App) accountBlocked(key *Key) bool {
	return key != nil && key.ID != "" && a.accounts != nil && a.accounts.Blocked(key.Owner)
}

// accountSuspended is the 403 of a request whose key's account is
// suspended or deleted (gateway.AccountSuspended).
func accountSuspended() *providers.Error { return gateway.AccountSuspended() }

// ListAccountFiles returns a page of the files an account owns.
func (a *App) ListAccountFiles(ctx context.Context, account string, opt batch.ListOptions) (batch.Page[batch.File], error) {
	return a.store.ListFiles(ctx, account, opt)
}

// ListAccountBatches returns a page of the batches an account owns.
func (a *App) ListAccountBatches(ctx context.Context, account string, opt batch.ListOptions) (batch.Page[batch.Batch], error) {
	return a.store.ListBatches(ctx, account, opt)
}

// unmarshalAccounts reads the accounts { … } block. Syntax:
//
//	accounts {
//	    member <identity> <account> owner|admin|member|viewer
//	    group  <group>    <account> owner|admin|member|viewer
//	    personal_accounts on|off
//	    audit_retention <duration>
//	}
func (c *AccountsConfig) unmarshalAccounts(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "member", "group":
			var who, account, role string
			if !d.AllArgs(&who, &account, &role) {
				return d.ArgErr()
			}
			r, err := accounts.ParseRole(role)
			if err != nil {
				return d.Errf("accounts %s %s: %v", opt, who, err)
			}
			if opt == "member" {
				c.Members = append(c.Members, accounts.ConfigMember{Identity: who, Account: account, Role: r})
			} else {
				c.Groups = append(c.Groups, accounts.GroupRule{Group: who, Account: account, Role: r})
			}
		case "personal_accounts":
			var v string
			if !d.AllArgs(&v) || v != "on" && v != "off" {
				return d.Err("accounts personal_accounts: on or off")
			}
			c.NoPersonal = v == "off"
		case "audit_retention":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("accounts audit_retention: %q is not a duration such as 400d", v)
			}
			c.AuditRetention = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized accounts option %q", opt)
		}
	}
	return c.Validate()
}

// ownerPolicy is the policy key's requests count against as its owner's:
// a managed key's account's ceilings (the account's own, else the
// configured owner policy), a static key's configured owner policy.
func (a *App) ownerPolicy(key *Key) keys.Policy {
	if key.ID != "" && a.service != nil {
		return a.service.Ceilings(key.Owner)
	}
	return a.Limits.ownerPolicy(key.Owner)
}
