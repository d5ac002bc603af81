package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// env is a Service on an in-memory storage, with its audit entries as they
// were emitted.
type env struct {
	svc     *Service
	emitted []Entry
	now     time.Time
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	st := storagetest.NewMemory()
	e := &env{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	clock := func() time.Time { return e.now }
	km := keys.NewManager(st, "modelgate")
	km.Now = clock
	am := NewManager(st, "modelgate")
	am.Now = clock
	log := NewAuditLog(st, "modelgate")
	log.Now = clock
	log.Emit = func(en Entry, err error) {
		if err != nil {
			t.Errorf("audit entry not stored: %v", err)
		}
		e.emitted = append(e.emitted, en)
	}
	e.svc = &Service{Keys: km, Accounts: am, Audit: log, Config: cfg,
		Configured: func(string) keys.Policy { return keys.Policy{} }}
	return e
}

func (e *env) signIn(t *testing.T, identity string, groups ...string) Actor {
	t.Helper()
	a, err := e.svc.SignIn(Principal{Identity: identity, Groups: groups, From: "192.0.2.1"})
	if err != nil {
		t.Fatalf("SignIn(%s): %v", identity, err)
	}
	return a
}

func (e *env) create(t *testing.T, a Actor, name string) keys.Key {
	t.Helper()
	k, _, err := e.svc.CreateKey(context.Background(), a, keys.NewKey{Name: name})
	if err != nil {
		t.Fatalf("CreateKey(%s) as %s: %v", name, a.Describe(), err)
	}
	return k
}

func TestSignInResolution(t *testing.T) {
	e := newEnv(t, Config{
		Members: []ConfigMember{{Identity: "carol", Account: "team-a", Role: RoleAdmin}},
		Groups:  []GroupRule{{Group: "eng", Account: "team-eng", Role: RoleMember}, {Group: "ops", Account: "team-ops", Role: RoleViewer}},
	})
	ctx := context.Background()
	if _, err := e.svc.SetMember(ctx, Operator("admin API", ""), "team-b", "dave", RoleOwner); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		identity string
		groups   []string
		account  string
		role     Role
	}{
		{"alice", nil, "alice", RoleOwner},                       // personal
		{"carol", []string{"eng"}, "team-a", RoleAdmin},          // the config first
		{"dave", []string{"eng"}, "team-b", RoleOwner},           // then run-time members
		{"erin", []string{"ops", "eng"}, "team-eng", RoleMember}, // then groups, in the config's order
		{"frank", []string{"ops"}, "team-ops", RoleViewer},
	} {
		a := e.signIn(t, c.identity, c.groups...)
		if a.Account != c.account || a.Role != c.role || a.Kind != ActorHolder {
			t.Errorf("%s %v: %+v, want %s %s", c.identity, c.groups, a, c.account, c.role)
		}
	}
	if _, err := e.svc.SignIn(Principal{Identity: "bad\nname"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("an identity with a control character: %v", err)
	}

	e.svc.Config.NoPersonal = true
	if _, err := e.svc.SignIn(Principal{Identity: "alice"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("no_personal_accounts, an identity no rule names: %v", err)
	}
}

// TestAccountsSeeOnlyTheirOwn: two account holders each see, change and
// delete only their own keys; the other's are ErrNotFound, as if they did
// not exist, and stay as they were.
func TestAccountsSeeOnlyTheirOwn(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	alice, bob := e.signIn(t, "alice"), e.signIn(t, "bob")
	ka, kb := e.create(t, alice, "a1"), e.create(t, bob, "b1")
	if ka.Owner != "alice" || ka.CreatedBy != "alice" || kb.Owner != "bob" {
		t.Fatalf("owners: %+v %+v", ka, kb)
	}
	list, err := e.svc.ListKeys(ctx, alice, "")
	if err != nil || len(list) != 1 || list[0].ID != ka.ID {
		t.Fatalf("alice's list: %+v %v", list, err)
	}
	if _, err := e.svc.GetKey(ctx, alice, kb.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("alice reads bob's key: %v", err)
	}
	if _, err := e.svc.SetKeyPolicy(ctx, alice, kb.ID, keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 1}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("alice limits bob's key: %v", err)
	}
	if err := e.svc.DeleteKey(ctx, alice, kb.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("alice deletes bob's key: %v", err)
	}
	if _, _, err := e.svc.CreateKey(ctx, alice, keys.NewKey{Name: "x", Owner: "bob"}); err == nil {
		t.Error("alice created a key for bob's account")
	}
	if got, err := e.svc.GetKey(ctx, bob, kb.ID); err != nil || got.Limits != nil {
		t.Errorf("bob's key after alice tried: %+v %v", got, err)
	}
	if err := e.svc.DeleteKey(ctx, bob, kb.ID); err != nil {
		t.Errorf("bob deletes his key: %v", err)
	}
	op := Operator("admin API", "127.0.0.1")
	if all, err := e.svc.ListKeys(ctx, op, ""); err != nil || len(all) != 1 {
		t.Errorf("the operator's list: %+v %v", all, err)
	}
}

func TestRoles(t *testing.T) {
	e := newEnv(t, Config{Members: []ConfigMember{
		{Identity: "o", Account: "t", Role: RoleOwner}, {Identity: "ad", Account: "t", Role: RoleAdmin},
		{Identity: "m1", Account: "t", Role: RoleMember}, {Identity: "m2", Account: "t", Role: RoleMember},
		{Identity: "v", Account: "t", Role: RoleViewer},
	}})
	ctx := context.Background()
	o, ad, m1, m2, v := e.signIn(t, "o"), e.signIn(t, "ad"), e.signIn(t, "m1"), e.signIn(t, "m2"), e.signIn(t, "v")
	k1 := e.create(t, m1, "m1-key")
	e.create(t, m2, "m2-key")
	ko := e.create(t, o, "owner-key")

	count := func(a Actor) int {
		l, err := e.svc.ListKeys(ctx, a, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	if count(o) != 3 || count(ad) != 3 || count(v) != 3 || count(m1) != 1 {
		t.Errorf("lists: owner %d admin %d viewer %d member %d", count(o), count(ad), count(v), count(m1))
	}
	if _, err := e.svc.GetKey(ctx, m1, ko.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a member reads the owner's key: %v", err)
	}
	if _, _, err := e.svc.CreateKey(ctx, v, keys.NewKey{Name: "v"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a viewer creates a key: %v", err)
	}
	if err := e.svc.DeleteKey(ctx, v, k1.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("a viewer deletes a key: %v", err)
	}
	if _, err := e.svc.SetKeyPolicy(ctx, ad, k1.ID, keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 5}}); err != nil {
		t.Errorf("an admin limits a member's key: %v", err)
	}
	if _, err := e.svc.SetMember(ctx, ad, "t", "new", RoleMember); !errors.Is(err, ErrForbidden) {
		t.Errorf("an admin adds a member: %v", err)
	}
	if _, err := e.svc.SetMember(ctx, o, "t", "new", RoleMember); err != nil {
		t.Errorf("an owner adds a member: %v", err)
	}
	if _, err := e.svc.SetMember(ctx, o, "t", "m1", RoleAdmin); !errors.Is(err, ErrConflict) {
		t.Errorf("an owner changes a member from the config: %v", err)
	}
	if _, err := e.svc.AuditEntries(ctx, m1, "t", ListOptions{}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a member reads the audit log: %v", err)
	}
	if _, err := e.svc.AuditEntries(ctx, v, "t", ListOptions{}); err != nil {
		t.Errorf("a viewer reads the audit log: %v", err)
	}
	if _, err := e.svc.AuditEntries(ctx, e.signIn(t, "stranger"), "t", ListOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another account reads the audit log: %v", err)
	}
	if err := e.svc.DeleteKey(ctx, m1, k1.ID); err != nil {
		t.Errorf("a member deletes its own key: %v", err)
	}
}

func TestLastOwnerStays(t *testing.T) {
	e := newEnv(t, Config{NoPersonal: true})
	ctx := context.Background()
	op := Operator("admin API", "")
	if _, err := e.svc.SetMember(ctx, op, "team", "ann", RoleOwner); err != nil {
		t.Fatal(err)
	}
	ann := e.signIn(t, "ann")
	if err := e.svc.RemoveMember(ctx, ann, "team", "ann"); !errors.Is(err, ErrConflict) {
		t.Errorf("the last owner removes itself: %v", err)
	}
	if _, err := e.svc.SetMember(ctx, ann, "team", "ann", RoleViewer); !errors.Is(err, ErrConflict) {
		t.Errorf("the last owner demotes itself: %v", err)
	}
	if _, err := e.svc.SetMember(ctx, ann, "team", "ben", RoleOwner); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RemoveMember(ctx, ann, "team", "ann"); err != nil {
		t.Errorf("an owner leaves another owner: %v", err)
	}
}

func TestCeilings(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	op := Operator("admin API", "")
	alice := e.signIn(t, "alice")
	if _, err := e.svc.SetAccountPolicy(ctx, op, "alice", keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 100},
		Budget: &keys.Budget{USD: "50", Period: "month"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p     keys.Policy
		param string
	}{
		{keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 100}}, ""},
		{keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 101}}, "limits.requests_per_minute"},
		{keys.Policy{Limits: &keys.Limits{TokensPerMinute: 1 << 40}}, ""}, // the account has no such limit
		{keys.Policy{Budget: &keys.Budget{USD: "50", Period: "day"}}, ""},
		{keys.Policy{Budget: &keys.Budget{USD: "50.01", Period: "month"}}, "budget.usd"},
	} {
		_, _, err := e.svc.CreateKey(ctx, alice, keys.NewKey{Name: "k", Limits: c.p.Limits, Budget: c.p.Budget})
		var inv *keys.InvalidError
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%+v: %v", c.p, err)
		case c.param != "" && (!errors.As(err, &inv) || inv.Param != c.param):
			t.Errorf("%+v: %v, want a refusal of %s", c.p, err, c.param)
		}
	}
	// The operator is not bound by them.
	if _, _, err := e.svc.CreateKey(ctx, op, keys.NewKey{Name: "k", Owner: "alice", Limits: &keys.Limits{RequestsPerMinute: 1000}}); err != nil {
		t.Errorf("the operator: %v", err)
	}
	// The configured owner policy is the ceiling of an account without its own.
	e.svc.Configured = func(string) keys.Policy { return keys.Policy{Limits: &keys.Limits{ConcurrentRequests: 2}} }
	bob := e.signIn(t, "bob")
	if _, _, err := e.svc.CreateKey(ctx, bob, keys.NewKey{Name: "k", Limits: &keys.Limits{ConcurrentRequests: 3}}); err == nil {
		t.Error("a key above the configured owner limit")
	}
}

// TestSuspendAndDelete: a suspended account is blocked, in memory, and its
// holders change nothing but deletions; a deleted one has no keys left,
// and nobody signs in to it or gives it keys again.
func TestSuspendAndDelete(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	op := Operator("admin API", "127.0.0.1")
	alice := e.signIn(t, "alice")
	k1, k2 := e.create(t, alice, "one"), e.create(t, alice, "two")
	e.create(t, e.signIn(t, "bob"), "bob's")

	if _, err := e.svc.Suspend(ctx, alice, "alice", ""); !errors.Is(err, ErrForbidden) {
		t.Errorf("an account holder suspends: %v", err)
	}
	if _, err := e.svc.Suspend(ctx, op, "alice", "unpaid"); err != nil {
		t.Fatal(err)
	}
	if !e.svc.Accounts.Blocked("alice") || e.svc.Accounts.Blocked("bob") {
		t.Error("Blocked after suspending alice")
	}
	if _, _, err := e.svc.CreateKey(ctx, alice, keys.NewKey{Name: "three"}); !errors.Is(err, ErrSuspended) {
		t.Errorf("creating a key while suspended: %v", err)
	}
	if err := e.svc.DeleteKey(ctx, alice, k1.ID); err != nil {
		t.Errorf("deleting a key while suspended: %v", err)
	}
	if _, err := e.svc.Resume(ctx, op, "alice"); err != nil || e.svc.Accounts.Blocked("alice") {
		t.Fatalf("resume: %v", err)
	}

	deleted, err := e.svc.DeleteAccount(ctx, op, "alice")
	if err != nil || len(deleted) != 1 || deleted[0] != k2.ID {
		t.Fatalf("DeleteAccount: %v %v", deleted, err)
	}
	if !e.svc.Accounts.Blocked("alice") {
		t.Error("a deleted account is not blocked")
	}
	if _, err := e.svc.SignIn(Principal{Identity: "alice"}); !errors.Is(err, ErrDeleted) {
		t.Errorf("signing in to a deleted account: %v", err)
	}
	if _, _, err := e.svc.CreateKey(ctx, op, keys.NewKey{Name: "again", Owner: "alice"}); !errors.Is(err, ErrConflict) {
		t.Errorf("a key for a deleted account: %v", err)
	}
	if _, err := e.svc.DeleteAccount(ctx, op, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting it again: %v", err)
	}
	if _, err := e.svc.DeleteAccount(ctx, op, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting an account that never was: %v", err)
	}
	list, err := e.svc.ListAccounts(ctx, op)
	if err != nil || len(list) != 2 || list[0].ID != "alice" || list[0].DeletedAt == nil || list[1].ID != "bob" || list[1].Keys != 1 {
		t.Errorf("ListAccounts: %+v %v", list, err)
	}
}

// TestAuditLog: every change is recorded under its account with who did
// it, from where, before and after, never a secret; an account holder
// reads its own account's, newest first, a page at a time.
func TestAuditLog(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	alice := e.signIn(t, "alice")
	k, secret, err := e.svc.CreateKey(ctx, alice, keys.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(24 * time.Hour)
	if _, err := e.svc.SetKeyPolicy(ctx, alice, k.ID, keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 7}}); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(time.Second)
	op := Operator("admin API", "127.0.0.1:5555")
	if _, err := e.svc.Suspend(ctx, op, "alice", "audit"); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(time.Second)
	if err := e.svc.DeleteKey(ctx, Scanner("github"), k.ID); err != nil {
		t.Fatal(err)
	}
	e.create(t, e.signIn(t, "bob"), "bob's")

	page, err := e.svc.AuditEntries(ctx, alice, "alice", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range page.Data {
		got = append(got, en.Action+" by "+string(en.Actor.Kind))
	}
	want := []string{"key.deleted by secret_scanner", "account.suspended by operator", "key.limits_set by account_holder", "key.created by account_holder"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("alice's log: %q, want %q", got, want)
	}
	set := page.Data[2]
	if set.Actor.Identity != "alice" || set.Actor.From != "192.0.2.1" || set.Target.ID != k.ID ||
		!strings.Contains(string(set.After), `"requests_per_minute":7`) || strings.Contains(string(set.Before), "requests_per_minute") {
		t.Errorf("the limits entry: %+v", set)
	}
	for _, en := range e.emitted {
		b, _ := json.Marshal(en)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "sha256") {
			t.Errorf("an entry holds a secret: %s", b)
		}
	}
	if len(e.emitted) != 5 {
		t.Errorf("%d entries emitted, want 5", len(e.emitted))
	}
	// A page at a time.
	first, err := e.svc.AuditEntries(ctx, alice, "alice", ListOptions{Limit: 3})
	if err != nil || len(first.Data) != 3 || !first.HasMore {
		t.Fatalf("the first page: %+v %v", first, err)
	}
	rest, err := e.svc.AuditEntries(ctx, alice, "alice", ListOptions{Before: first.Data[2].ID})
	if err != nil || len(rest.Data) != 1 || rest.Data[0].Action != "key.created" || rest.HasMore {
		t.Fatalf("the next page: %+v %v", rest, err)
	}

	// Retention drops whole days past it.
	e.svc.Audit.Retention = 24 * time.Hour
	e.now = e.now.Add(24 * time.Hour)
	if n, err := e.svc.Audit.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune: %d %v", n, err)
	}
	page, _ = e.svc.AuditEntries(ctx, op, "alice", ListOptions{})
	if len(page.Data) != 3 {
		t.Errorf("after pruning a day, %d entries, want the 3 of the next day", len(page.Data))
	}
}

func TestRecipients(t *testing.T) {
	e := newEnv(t, Config{Members: []ConfigMember{{Identity: "m", Account: "t", Role: RoleMember}, {Identity: "a", Account: "t", Role: RoleAdmin}}})
	ctx := context.Background()
	op := Operator("admin API", "")
	if _, err := e.svc.SetAccountEmail(ctx, op, "t", "billing@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"m", "a"} {
		if err := e.svc.RecordContact(ctx, e.signIn(t, who), who+"@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	n := len(e.emitted)
	if err := e.svc.RecordContact(ctx, e.signIn(t, "a"), "a@example.com"); err != nil || len(e.emitted) != n {
		t.Errorf("the same address again wrote: %v", err)
	}
	got := strings.Join(e.svc.Recipients("t"), " ")
	if got != "billing@example.com a@example.com" {
		t.Errorf("Recipients: %q", got)
	}
	if err := e.svc.RecordContact(ctx, e.signIn(t, "a"), "Not An Address"); err == nil {
		t.Error("a bad address was recorded")
	}
}

// TestManagersShareStorage: a change on one Manager reaches another on the
// same storage by Reload (a message) or Refresh (the safety net).
func TestManagersShareStorage(t *testing.T) {
	st := storagetest.NewMemory()
	a, b := NewManager(st, "modelgate"), NewManager(st, "modelgate")
	ctx := context.Background()
	var told []string
	a.Changed = func(id string) { told = append(told, id) }
	if _, _, err := a.Update(ctx, "team", func(acct *Account) error {
		now := int64(1)
		acct.SuspendedAt = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || told[0] != "team" {
		t.Errorf("Changed told %q", told)
	}
	if b.Blocked("team") {
		t.Fatal("b knew before it reloaded")
	}
	if err := b.Reload(ctx, "team"); err != nil || !b.Blocked("team") {
		t.Fatalf("after Reload: %v %v", b.Blocked("team"), err)
	}
	if _, _, err := a.Update(ctx, "team", func(acct *Account) error { acct.SuspendedAt = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil || b.Blocked("team") {
		t.Fatalf("after Refresh: %v %v", b.Blocked("team"), err)
	}
	if _, _, err := a.Update(ctx, "bad\x00id", func(*Account) error { return nil }); err == nil {
		t.Error("an id with a control character was stored")
	}
}

// TestExistingKeysBelongToAccounts: keys stored before accounts existed
// (an owner, no creator, no account record) are their owner's account's
// at once: its holder sees and manages them, the operator lists the
// account, and nothing was written to make it so.
func TestExistingKeysBelongToAccounts(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	old, _, err := e.svc.Keys.Create(ctx, keys.NewKey{Name: "from-before", Owner: "team-old"})
	if err != nil {
		t.Fatal(err)
	}
	holder := e.signIn(t, "team-old")
	list, err := e.svc.ListKeys(ctx, holder, "")
	if err != nil || len(list) != 1 || list[0].ID != old.ID {
		t.Fatalf("the holder's keys: %+v %v", list, err)
	}
	if _, err := e.svc.SetKeyPolicy(ctx, holder, old.ID, keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 3}}); err != nil {
		t.Errorf("the holder limits a key from before: %v", err)
	}
	accts, err := e.svc.ListAccounts(ctx, Operator("admin API", ""))
	if err != nil || len(accts) != 1 || accts[0].ID != "team-old" || accts[0].Keys != 1 {
		t.Errorf("the operator's accounts: %+v %v", accts, err)
	}
	if recs := e.svc.Accounts.Records(); len(recs) != 0 {
		t.Errorf("account records were written: %+v", recs)
	}
}

// TestViewJSON: an account's view carries its record's fields, its
// ceilings and its members from every source.
func TestViewJSON(t *testing.T) {
	e := newEnv(t, Config{Members: []ConfigMember{{Identity: "m", Account: "t", Role: RoleMember}}})
	ctx := context.Background()
	op := Operator("admin API", "")
	if _, err := e.svc.SetAccountPolicy(ctx, op, "t", keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 5}}); err != nil {
		t.Fatal(err)
	}
	v, err := e.svc.GetAccount(ctx, op, "t")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	var back View
	if err := json.Unmarshal(b, &back); err != nil || back.ID != "t" || back.Ceilings.Limits == nil || back.Ceilings.Limits.RequestsPerMinute != 5 ||
		len(back.Everyone) < 1 || back.Everyone[0].Source != "config" || !strings.Contains(string(b), `"members":[]`) {
		t.Errorf("the view's JSON: %s %v", b, err)
	}
}
