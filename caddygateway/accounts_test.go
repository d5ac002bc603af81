package caddygateway

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// withAccounts gives a test's App, built without Provision, the accounts
// service on st, as provisionAccounts does.
func withAccounts(a *App, st accounts.Storage) *App {
	if a.logger == nil {
		a.logger = zap.NewNop()
	}
	a.accounts = accounts.NewManager(st, "modelgate")
	a.audit = accounts.NewAuditLog(st, "modelgate")
	a.service = &accounts.Service{Keys: a.managed, Accounts: a.accounts, Audit: a.audit, Configured: a.Limits.ownerPolicy}
	return a
}

// TestAccountCeilingsAreOwnerPolicy: a managed key's requests count
// against its account's own limits and budget where it has them, else
// the configured owner policy; a static key's always against the
// configured one, whatever account of its name exists.
func TestAccountCeilingsAreOwnerPolicy(t *testing.T) {
	st := storagetest.NewMemory()
	a := &App{managed: keys.NewManager(st, "modelgate"), Limits: &LimitsConfig{
		Owner: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 10}},
	}}
	withAccounts(a, st)
	if err := a.Limits.provision(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := accounts.Operator("test", "")
	if _, err := a.service.SetAccountPolicy(ctx, op, "team", keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 99},
		Budget: &keys.Budget{USD: "5", Period: "day"}}); err != nil {
		t.Fatal(err)
	}
	managed := a.subjects(&Key{ID: "key_x", Name: "k", Owner: "team"})
	if managed.Owner.Limits.RequestsPerMinute != 99 || managed.Owner.Budget.Amount == 0 {
		t.Errorf("a managed key of an account with ceilings: %+v", managed.Owner)
	}
	other := a.subjects(&Key{ID: "key_y", Name: "k", Owner: "elsewhere"})
	if other.Owner.Limits.RequestsPerMinute != 10 || other.Owner.Budget.Amount != 0 {
		t.Errorf("a managed key of an account without: %+v", other.Owner)
	}
	static := a.subjects(&Key{Name: "team", Owner: "team"})
	if static.Owner.Limits.RequestsPerMinute != 10 {
		t.Errorf("a static key named as an account: %+v", static.Owner)
	}
	// Suspended, the managed keys of the account are blocked; static keys never.
	if _, err := a.service.Suspend(ctx, op, "team", ""); err != nil {
		t.Fatal(err)
	}
	if !a.accountBlocked(&Key{ID: "key_x", Owner: "team"}) || a.accountBlocked(&Key{Name: "team", Owner: "team"}) ||
		a.accountBlocked(&Key{ID: "key_y", Owner: "elsewhere"}) {
		t.Error("accountBlocked")
	}
}
