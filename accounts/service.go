package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"sort"
	"strings"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
)

// Config is the accounts' part of the configuration: members and group
// rules set by the operator, and whether an identity with neither has an
// account of its own.
type Config struct {
	// Members give identities a role in an account.
	Members []ConfigMember `json:"members,omitempty"`
	// Groups give the identities that the identity provider puts in a
	// group (the key settings page's groups placeholder) a role in an
	// account.
	Groups []GroupRule `json:"groups,omitempty"`
	// NoPersonal refuses identities that no member entry or group rule
	// names; by default such an identity is the owner of the account of
	// its own name.
	NoPersonal bool `json:"no_personal_accounts,omitempty"`
}

// ConfigMember is a member set in the config.
type ConfigMember struct {
	Identity string `json:"identity"`
	Account  string `json:"account"`
	Role     Role   `json:"role"`
}

// GroupRule gives the members of an identity provider's group a role in
// an account.
type GroupRule struct {
	Group   string `json:"group"`
	Account string `json:"account"`
	Role    Role   `json:"role"`
}

// Validate checks the config's ids and roles.
func (c Config) Validate() error {
	seen := map[string]bool{}
	for _, m := range c.Members {
		if msg := CheckID(m.Identity); msg != "" {
			return fmt.Errorf("member identity %q %s", m.Identity, msg)
		}
		if msg := CheckID(m.Account); msg != "" {
			return fmt.Errorf("member %s: account %q %s", m.Identity, m.Account, msg)
		}
		if _, err := ParseRole(string(m.Role)); err != nil {
			return fmt.Errorf("member %s: %w", m.Identity, err)
		}
		if seen[m.Identity] {
			return fmt.Errorf("member %s is given twice: an identity belongs to one account", m.Identity)
		}
		seen[m.Identity] = true
	}
	for _, g := range c.Groups {
		if g.Group == "" {
			return errors.New("group: a group name is required")
		}
		if msg := CheckID(g.Account); msg != "" {
			return fmt.Errorf("group %s: account %q %s", g.Group, g.Account, msg)
		}
		if _, err := ParseRole(string(g.Role)); err != nil {
			return fmt.Errorf("group %s: %w", g.Group, err)
		}
	}
	return nil
}

// Principal is who the authentication in front of the key settings page
// says is there.
type Principal struct {
	Identity string
	// Email is the address the sign-in carried, if any.
	Email string
	// Groups are the identity provider's groups of the identity.
	Groups []string
	// From is the client's address.
	From string
}

// Service performs every change to keys, accounts and members on behalf
// of an Actor: it decides whether the actor may, does it, and writes the
// audit log. The key settings page and the admin API both go through it.
type Service struct {
	Keys     *keys.Manager
	Accounts *Manager
	Audit    *AuditLog
	Config   Config
	// Configured returns the ceilings the config sets for an account
	// (its limits { owner } entry, else the default); nil: none.
	Configured func(account string) keys.Policy
}

// SignIn resolves a principal to the account it acts in and its role:
// the config's member entry of the identity, else the first account
// (by id) that made it a member, else the first group rule (in the
// config's order) of one of its groups, else the account of its own name
// as its owner (unless NoPersonal). A deleted account is ErrDeleted.
func (s *Service) SignIn(p Principal) (Actor, error) {
	if msg := CheckID(p.Identity); msg != "" {
		return Actor{}, fmt.Errorf("%w: the signed-in identity %s", ErrForbidden, msg)
	}
	a := Actor{Kind: ActorHolder, Identity: p.Identity, From: p.From}
	a.Account, a.Role = s.resolve(p)
	if a.Account == "" {
		return Actor{}, fmt.Errorf("%w: %q is not a member of any account", ErrForbidden, p.Identity)
	}
	if rec, _ := s.Accounts.Lookup(a.Account); rec.DeletedAt != nil {
		return Actor{}, fmt.Errorf("%w: account %q", ErrDeleted, a.Account)
	}
	return a, nil
}

func (s *Service) resolve(p Principal) (string, Role) {
	for _, m := range s.Config.Members {
		if m.Identity == p.Identity {
			return m.Account, m.Role
		}
	}
	if ms := s.Accounts.Memberships(p.Identity); len(ms) > 0 {
		return ms[0].Account, ms[0].Role
	}
	for _, g := range s.Config.Groups {
		if slices.Contains(p.Groups, g.Group) {
			return g.Account, g.Role
		}
	}
	if s.Config.NoPersonal {
		return "", ""
	}
	return p.Identity, RoleOwner
}

// RecordContact notes the e-mail address an account holder's sign-in
// carried, with its role, when it is new: leak mail goes to the owners'
// and admins' addresses. It writes only when something changed.
func (s *Service) RecordContact(ctx context.Context, a Actor, email string) error {
	if a.Kind != ActorHolder || email == "" {
		return nil
	}
	if addr, err := mail.ParseAddress(email); err != nil || addr.Name != "" {
		return invalid("email", "the sign-in's e-mail %q is not an address", email)
	}
	rec, _ := s.Accounts.Lookup(a.Account)
	for _, c := range rec.Contacts {
		if c.Identity == a.Identity && c.Email == email && c.Role == a.Role {
			return nil
		}
	}
	var old *Contact
	_, after, err := s.Accounts.Update(ctx, a.Account, func(acct *Account) error {
		c := Contact{Identity: a.Identity, Email: email, Role: a.Role, SeenAt: s.Accounts.now().Unix()}
		for i := range acct.Contacts {
			if acct.Contacts[i].Identity == a.Identity {
				prev := acct.Contacts[i]
				old, acct.Contacts[i] = &prev, c
				return nil
			}
		}
		acct.Contacts = append(acct.Contacts, c)
		return nil
	})
	if err != nil {
		return err
	}
	var now *Contact
	for _, c := range after.Contacts {
		if c.Identity == a.Identity {
			now = &c
		}
	}
	_, err = s.Audit.Record(ctx, a.Account, a, "account.contact_recorded", Target{Type: "member", ID: a.Identity}, old, now)
	return err
}

// Recipients are the addresses leak mail about the account's keys goes
// to: the account's e-mail, and those of its owners and admins that
// signed in with one.
func (s *Service) Recipients(account string) []string {
	rec, _ := s.Accounts.Lookup(account)
	var out []string
	add := func(addr string) {
		if addr != "" && !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	add(rec.Email)
	for _, c := range rec.Contacts {
		if c.Role.manages() {
			add(c.Email)
		}
	}
	return out
}

// ---- Authorization ----

// operator reports whether the actor may do anything to any account.
func (a Actor) operator() bool { return a.Kind == ActorOperator || a.Kind == ActorScanner }

// Sees reports whether the actor may see the key: the operator every key;
// an account holder the keys of its account, a member only those it
// created.
func (a Actor) Sees(k keys.Key) bool {
	if a.operator() {
		return true
	}
	if k.Owner != a.Account {
		return false
	}
	return a.Role != RoleMember || k.CreatedBy == a.Identity
}

// Changes reports whether the actor may change or delete a key it sees:
// every role but viewer.
func (a Actor) Changes(k keys.Key) bool {
	return a.Sees(k) && (a.operator() || a.Role != RoleViewer)
}

// ReadsAccount reports whether the actor may read the account's members
// and audit log: the operator, and its owners, admins and viewers.
func (a Actor) ReadsAccount(account string) bool {
	return a.operator() || a.Account == account && a.Role != RoleMember
}

// ManagesMembers reports whether the actor may change the account's
// members: the operator and the account's owners.
func (a Actor) ManagesMembers(account string) bool {
	return a.operator() || a.Account == account && a.Role == RoleOwner
}

// SeesAllKeys reports whether the actor sees every key of its account
// (and so the account's whole usage): every role but member.
func (a Actor) SeesAllKeys() bool { return a.operator() || a.Role != RoleMember }

// Is reports whether the actor is the operator (or secret scanning).
func (a Actor) Is(kind ActorKind) bool { return a.Kind == kind }

// account checks that an account holder may act in account: another
// account is ErrNotFound, as if it did not exist.
func (a Actor) account(account string) error {
	if a.operator() || a.Account == account {
		return nil
	}
	return ErrNotFound
}

// writable refuses changes by an account holder of a suspended account.
func (s *Service) writable(a Actor) error {
	if a.operator() {
		return nil
	}
	if rec, _ := s.Accounts.Lookup(a.Account); rec.SuspendedAt != nil {
		return ErrSuspended
	} else if rec.DeletedAt != nil {
		return ErrDeleted
	}
	return nil
}

// ---- Keys ----

// ListKeys returns the keys the actor sees, oldest first; the operator
// may keep only one account's (owner non-empty).
func (s *Service) ListKeys(ctx context.Context, a Actor, owner string) ([]keys.Key, error) {
	all, err := s.Keys.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]keys.Key, 0, len(all))
	for _, k := range all {
		if a.Sees(k) && (owner == "" || k.Owner == owner) {
			out = append(out, k)
		}
	}
	return out, nil
}

// GetKey returns a key the actor sees; any other is ErrNotFound, whether
// it exists or not.
func (s *Service) GetKey(ctx context.Context, a Actor, id string) (keys.Key, error) {
	k, err := s.Keys.Get(ctx, id)
	if errors.Is(err, keys.ErrNotFound) {
		return keys.Key{}, ErrNotFound
	}
	if err != nil {
		return keys.Key{}, err
	}
	if !a.Sees(k) {
		return keys.Key{}, ErrNotFound
	}
	return k, nil
}

// CreateKey creates a key for the actor: an account holder's belongs to
// its account (nk.Owner must be empty or the account) and names it as
// its creator, within the account's ceilings; the operator's to nk.Owner
// (default: the name), unless that account was deleted.
func (s *Service) CreateKey(ctx context.Context, a Actor, nk keys.NewKey) (keys.Key, string, error) {
	if a.operator() {
		owner := nk.Owner
		if owner == "" {
			owner = nk.Name
		}
		if rec, _ := s.Accounts.Lookup(owner); rec.DeletedAt != nil {
			return keys.Key{}, "", fmt.Errorf("%w: account %q has been deleted", ErrConflict, owner)
		}
	} else {
		if a.Role == RoleViewer {
			return keys.Key{}, "", fmt.Errorf("%w: a viewer creates no keys", ErrForbidden)
		}
		if err := s.writable(a); err != nil {
			return keys.Key{}, "", err
		}
		if nk.Owner != "" && nk.Owner != a.Account {
			return keys.Key{}, "", invalid("owner", "keys created here belong to account %q", a.Account)
		}
		nk.Owner, nk.CreatedBy = a.Account, a.Identity
		if err := s.withinCeilings(a.Account, keys.Policy{Limits: nk.Limits, Budget: nk.Budget}); err != nil {
			return keys.Key{}, "", err
		}
	}
	k, secret, err := s.Keys.Create(ctx, nk)
	if err != nil {
		return keys.Key{}, "", err
	}
	s.record(ctx, k.Owner, a, "key.created", keyTarget(k), nil, k)
	return k, secret, nil
}

// SetKeyPolicy replaces a key's limits and budget; an account holder's
// must be within the account's ceilings.
func (s *Service) SetKeyPolicy(ctx context.Context, a Actor, id string, p keys.Policy) (keys.Key, error) {
	before, err := s.changeable(ctx, a, id)
	if err != nil {
		return keys.Key{}, err
	}
	if err := s.writable(a); err != nil {
		return keys.Key{}, err
	}
	if !a.operator() {
		if err := keys.ValidatePolicy(p); err != nil {
			return keys.Key{}, err
		}
		if err := s.withinCeilings(before.Owner, p); err != nil {
			return keys.Key{}, err
		}
	}
	after, err := s.Keys.SetPolicy(ctx, id, p)
	if errors.Is(err, keys.ErrNotFound) {
		return keys.Key{}, ErrNotFound
	}
	if err != nil {
		return keys.Key{}, err
	}
	s.record(ctx, after.Owner, a, "key.limits_set", keyTarget(after), before, after)
	return after, nil
}

// DeleteKey deletes a key the actor may change.
func (s *Service) DeleteKey(ctx context.Context, a Actor, id string) error {
	before, err := s.changeable(ctx, a, id)
	if err != nil {
		return err
	}
	if err := s.Keys.Delete(ctx, id); errors.Is(err, keys.ErrNotFound) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	s.record(ctx, before.Owner, a, "key.deleted", keyTarget(before), before, nil)
	return nil
}

// KeyExposed records that secret scanning marked a key exposed.
func (s *Service) KeyExposed(ctx context.Context, a Actor, before, after keys.Key) {
	s.record(ctx, after.Owner, a, "key.exposed", keyTarget(after), before, after)
}

// changeable returns a key the actor may change: ErrNotFound for one it
// does not see, ErrForbidden for one it only reads.
func (s *Service) changeable(ctx context.Context, a Actor, id string) (keys.Key, error) {
	k, err := s.GetKey(ctx, a, id)
	if err != nil {
		return keys.Key{}, err
	}
	if !a.Changes(k) {
		return keys.Key{}, fmt.Errorf("%w: a viewer changes no keys", ErrForbidden)
	}
	return k, nil
}

func keyTarget(k keys.Key) Target { return Target{Type: "key", ID: k.ID, Name: k.Name} }

// record writes an audit entry; a failure is told through the log's Emit
// (the change itself has been made).
func (s *Service) record(ctx context.Context, account string, a Actor, action string, t Target, before, after any) {
	_, _ = s.Audit.Record(ctx, account, a, action, t, before, after)
}

// ---- Ceilings ----

// Ceilings are the limits and budget that bound an account's keys: its
// own, else the configured ones.
func (s *Service) Ceilings(account string) keys.Policy {
	rec, _ := s.Accounts.Lookup(account)
	var conf keys.Policy
	if s.Configured != nil {
		conf = s.Configured(account)
	}
	p := rec.Policy()
	if p.Limits == nil {
		p.Limits = conf.Limits
	}
	if p.Budget == nil {
		p.Budget = conf.Budget
	}
	return p
}

// withinCeilings refuses a key policy above the account's ceilings: each
// limit the account has bounds the key's own of that kind, and the
// account's budget bounds the amount of the key's.
func (s *Service) withinCeilings(account string, p keys.Policy) error {
	c := s.Ceilings(account)
	if cl, l := c.Limits, p.Limits; cl != nil && l != nil {
		for _, f := range []struct {
			param    string
			own, max int64
		}{{"limits.requests_per_minute", l.RequestsPerMinute, cl.RequestsPerMinute},
			{"limits.tokens_per_minute", l.TokensPerMinute, cl.TokensPerMinute},
			{"limits.concurrent_requests", l.ConcurrentRequests, cl.ConcurrentRequests}} {
			if f.max > 0 && f.own > f.max {
				return invalid(f.param, "%s is at most %d, the account's limit", f.param, f.max)
			}
		}
	}
	if cb, b := c.Budget, p.Budget; cb != nil && b != nil {
		max, err1 := pricing.ParseMoney(cb.USD)
		own, err2 := pricing.ParseMoney(b.USD)
		if err1 == nil && err2 == nil && own > max {
			return invalid("budget.usd", "budget.usd is at most %s, the account's budget (%s per %s)", cb.USD, cb.USD, cb.Period)
		}
	}
	return nil
}

// ---- Accounts ----

// View is an account as the API shows it: its record, its members from
// every source, and the ceilings in force.
type View struct {
	Account
	Ceilings keys.Policy  `json:"ceilings"`
	Everyone []MemberView `json:"members_all"`
}

// MarshalJSON writes the account's fields, then its ceilings and members
// (Account's own MarshalJSON would otherwise be promoted and leave them
// out).
func (v View) MarshalJSON() ([]byte, error) {
	f := accountFields(v.Account)
	if f.Members == nil {
		f.Members = []Member{}
	}
	everyone := v.Everyone
	if everyone == nil {
		everyone = []MemberView{}
	}
	return json.Marshal(struct {
		accountFields
		Ceilings keys.Policy  `json:"ceilings"`
		Everyone []MemberView `json:"members_all"`
	}{f, v.Ceilings, everyone})
}

// MemberView is a member and where its role comes from: "config",
// "group" (Identity is then the group, "group:<name>"), "api" (added at
// run time) or "personal" (the identity the account is named after).
type MemberView struct {
	Identity string `json:"identity"`
	Role     Role   `json:"role"`
	Source   string `json:"source"`
}

// GetAccount returns an account the actor may act in; another account is
// ErrNotFound.
func (s *Service) GetAccount(ctx context.Context, a Actor, id string) (View, error) {
	if err := a.account(id); err != nil {
		return View{}, err
	}
	rec, _, err := s.Accounts.Get(ctx, id)
	if err != nil {
		return View{}, err
	}
	if !a.ReadsAccount(id) {
		// A member sees whose account it is, not who else is in it.
		rec.Members, rec.Contacts = nil, nil
	}
	v := View{Account: rec, Ceilings: s.Ceilings(id)}
	if a.ReadsAccount(id) {
		v.Everyone = s.everyone(rec)
	}
	return v, nil
}

// everyone lists the account's members from every source.
func (s *Service) everyone(rec Account) []MemberView {
	out := []MemberView{}
	for _, m := range s.Config.Members {
		if m.Account == rec.ID {
			out = append(out, MemberView{Identity: m.Identity, Role: m.Role, Source: "config"})
		}
	}
	for _, g := range s.Config.Groups {
		if g.Account == rec.ID {
			out = append(out, MemberView{Identity: "group:" + g.Group, Role: g.Role, Source: "group"})
		}
	}
	for _, m := range rec.Members {
		out = append(out, MemberView{Identity: m.Identity, Role: m.Role, Source: "api"})
	}
	if !s.Config.NoPersonal && !s.configured(rec.ID) {
		if _, ok := rec.member(rec.ID); !ok && len(s.Accounts.Memberships(rec.ID)) == 0 {
			out = append(out, MemberView{Identity: rec.ID, Role: RoleOwner, Source: "personal"})
		}
	}
	return out
}

// configured reports whether the config makes identity a member.
func (s *Service) configured(identity string) bool {
	for _, m := range s.Config.Members {
		if m.Identity == identity {
			return true
		}
	}
	return false
}

// Summary is an account in the operator's list.
type Summary struct {
	ID          string      `json:"id"`
	Email       string      `json:"email,omitempty"`
	Keys        int         `json:"keys"`
	Members     int         `json:"members"`
	Ceilings    keys.Policy `json:"ceilings"`
	SuspendedAt *int64      `json:"suspended_at"`
	DeletedAt   *int64      `json:"deleted_at,omitempty"`
}

// ListAccounts returns every account, for the operator: those with a
// record, and the owners of managed keys (accounts since before accounts
// had records), sorted by id.
func (s *Service) ListAccounts(ctx context.Context, a Actor) ([]Summary, error) {
	if !a.operator() {
		return nil, ErrForbidden
	}
	all, err := s.Keys.List(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Summary{}
	get := func(id string) *Summary {
		if byID[id] == nil {
			byID[id] = &Summary{ID: id, Ceilings: s.Ceilings(id)}
		}
		return byID[id]
	}
	for _, rec := range s.Accounts.Records() {
		sm := get(rec.ID)
		sm.Email, sm.Members, sm.SuspendedAt, sm.DeletedAt = rec.Email, len(rec.Members), rec.SuspendedAt, rec.DeletedAt
	}
	for _, k := range all {
		get(k.Owner).Keys++
	}
	out := make([]Summary, 0, len(byID))
	for _, sm := range byID {
		out = append(out, *sm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// update changes an account for the operator and records action.
func (s *Service) update(ctx context.Context, a Actor, id, action string, f func(acct *Account) error) (Account, error) {
	if !a.operator() {
		return Account{}, ErrForbidden
	}
	before, after, err := s.Accounts.Update(ctx, id, func(acct *Account) error {
		if acct.DeletedAt != nil {
			return fmt.Errorf("%w: account %q has been deleted", ErrConflict, id)
		}
		return f(acct)
	})
	if err != nil {
		return Account{}, err
	}
	s.record(ctx, id, a, action, Target{Type: "account", ID: id}, before, after)
	return after, nil
}

// SetAccountPolicy sets an account's ceilings (nil fields: the
// configured ones). Operator only.
func (s *Service) SetAccountPolicy(ctx context.Context, a Actor, id string, p keys.Policy) (Account, error) {
	if err := keys.ValidatePolicy(p); err != nil {
		return Account{}, err
	}
	return s.update(ctx, a, id, "account.updated", func(acct *Account) error {
		acct.Limits, acct.Budget = p.Limits, p.Budget
		return nil
	})
}

// SetAccountEmail sets the address leak mail goes to ("" removes it).
// Operator only.
func (s *Service) SetAccountEmail(ctx context.Context, a Actor, id, email string) (Account, error) {
	if email != "" {
		if addr, err := mail.ParseAddress(email); err != nil || addr.Name != "" {
			return Account{}, invalid("email", "email %q is not an e-mail address", email)
		}
	}
	return s.update(ctx, a, id, "account.updated", func(acct *Account) error {
		acct.Email = email
		return nil
	})
}

// Suspend stops every key of the account, on every instance, until
// Resume. Operator only.
func (s *Service) Suspend(ctx context.Context, a Actor, id, reason string) (Account, error) {
	if len(reason) > 500 {
		return Account{}, invalid("reason", "reason must be at most 500 bytes")
	}
	return s.update(ctx, a, id, "account.suspended", func(acct *Account) error {
		now := s.Accounts.now().Unix()
		acct.SuspendedAt, acct.SuspendedReason = &now, reason
		return nil
	})
}

// Resume lets the keys of a suspended account work again. Operator only.
func (s *Service) Resume(ctx context.Context, a Actor, id string) (Account, error) {
	return s.update(ctx, a, id, "account.resumed", func(acct *Account) error {
		acct.SuspendedAt, acct.SuspendedReason = nil, ""
		return nil
	})
}

// DeleteAccount deletes an account for the operator: it is marked deleted
// first (its keys are refused everywhere at once), then every key of it
// is deleted, which cancels their batches. The record stays as a
// tombstone, so that the id is not signed in to or given keys again; its
// files and usage records stay under it. It returns the ids of the keys
// deleted.
func (s *Service) DeleteAccount(ctx context.Context, a Actor, id string) ([]string, error) {
	if !a.operator() {
		return nil, ErrForbidden
	}
	all, err := s.Keys.List(ctx)
	if err != nil {
		return nil, err
	}
	owned := slices.ContainsFunc(all, func(k keys.Key) bool { return k.Owner == id })
	before, after, err := s.Accounts.Update(ctx, id, func(acct *Account) error {
		if acct.DeletedAt != nil || acct.CreatedAt == 0 && !owned {
			return ErrNotFound // deleted already, or never an account
		}
		now := s.Accounts.now().Unix()
		acct.DeletedAt = &now
		acct.Members, acct.Contacts, acct.Limits, acct.Budget = nil, nil, nil, nil
		acct.SuspendedAt, acct.SuspendedReason, acct.Email = nil, "", ""
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Keys created since the listing above are refused all the same
	// (the account is blocked); list again to delete them too.
	if all, err = s.Keys.List(ctx); err != nil {
		return nil, fmt.Errorf("account %q is deleted and its keys refused, but they could not be listed to delete them: %w", id, err)
	}
	var deleted []string
	var errs []error
	for _, k := range all {
		if k.Owner != id {
			continue
		}
		if err := s.Keys.Delete(ctx, k.ID); err != nil && !errors.Is(err, keys.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, k.ID)
		s.record(ctx, id, a, "key.deleted", keyTarget(k), k, nil)
	}
	s.record(ctx, id, a, "account.deleted", Target{Type: "account", ID: id}, before, after)
	return deleted, errors.Join(errs...)
}

// ---- Members ----

// Members lists an account's members from every source.
func (s *Service) Members(ctx context.Context, a Actor, account string) ([]MemberView, error) {
	if err := a.account(account); err != nil {
		return nil, err
	}
	if !a.ReadsAccount(account) {
		return nil, fmt.Errorf("%w: a member does not list the account's members", ErrForbidden)
	}
	rec, _, err := s.Accounts.Get(ctx, account)
	if err != nil {
		return nil, err
	}
	return s.everyone(rec), nil
}

// SetMember gives identity the role in account, adding it if it is not a
// member yet. The account's owners and the operator may; a member from
// the config is changed in the config.
func (s *Service) SetMember(ctx context.Context, a Actor, account, identity string, role Role) (Member, error) {
	if err := s.memberChange(a, account); err != nil {
		return Member{}, err
	}
	if msg := CheckID(identity); msg != "" {
		return Member{}, invalid("identity", "identity %s", msg)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Member{}, invalid("role", "%v", err)
	}
	if err := s.notConfigured(identity); err != nil {
		return Member{}, err
	}
	var old *Member
	var m Member
	_, _, err := s.Accounts.Update(ctx, account, func(acct *Account) error {
		if acct.DeletedAt != nil {
			return ErrDeleted
		}
		m = Member{Identity: identity, Role: role, AddedAt: s.Accounts.now().Unix()}
		for i := range acct.Members {
			if acct.Members[i].Identity == identity {
				prev := acct.Members[i]
				old, m.AddedAt = &prev, prev.AddedAt
				acct.Members[i] = m
				return s.keepsOwner(a, *acct)
			}
		}
		acct.Members = append(acct.Members, m)
		return nil
	})
	if err != nil {
		return Member{}, err
	}
	action := "member.added"
	if old != nil {
		action = "member.updated"
	}
	s.record(ctx, account, a, action, Target{Type: "member", ID: identity}, old, m)
	return m, nil
}

// RemoveMember removes a run-time member from an account.
func (s *Service) RemoveMember(ctx context.Context, a Actor, account, identity string) error {
	if err := s.memberChange(a, account); err != nil {
		return err
	}
	if err := s.notConfigured(identity); err != nil {
		return err
	}
	var old Member
	_, _, err := s.Accounts.Update(ctx, account, func(acct *Account) error {
		i := slices.IndexFunc(acct.Members, func(m Member) bool { return m.Identity == identity })
		if i < 0 {
			return ErrNotFound
		}
		old = acct.Members[i]
		acct.Members = slices.Delete(acct.Members, i, i+1)
		return s.keepsOwner(a, *acct)
	})
	if err != nil {
		return err
	}
	s.record(ctx, account, a, "member.removed", Target{Type: "member", ID: identity}, old, nil)
	return nil
}

// memberChange checks that the actor may change account's members.
func (s *Service) memberChange(a Actor, account string) error {
	if err := a.account(account); err != nil {
		return err
	}
	if !a.ManagesMembers(account) {
		return fmt.Errorf("%w: only the account's owners change its members", ErrForbidden)
	}
	return s.writable(a)
}

func (s *Service) notConfigured(identity string) error {
	if s.configured(identity) {
		return fmt.Errorf("%w: %q is a member in the config; change it there", ErrConflict, identity)
	}
	return nil
}

// keepsOwner refuses an account holder's change that would leave the
// account without an owner who can sign in to it.
func (s *Service) keepsOwner(a Actor, acct Account) error {
	if a.operator() {
		return nil
	}
	for _, m := range s.everyone(acct) {
		if m.Role == RoleOwner {
			return nil
		}
	}
	return fmt.Errorf("%w: the account would be left without an owner", ErrConflict)
}

// AuditEntries returns an account's audit log, newest first, to the
// operator and to the account's owners, admins and viewers.
func (s *Service) AuditEntries(ctx context.Context, a Actor, account string, opt ListOptions) (Page, error) {
	if err := a.account(account); err != nil {
		return Page{}, err
	}
	if !a.ReadsAccount(account) {
		return Page{}, fmt.Errorf("%w: a member does not read the account's audit log", ErrForbidden)
	}
	return s.Audit.List(ctx, account, opt)
}

// Describe names an actor for a log line.
func (a Actor) Describe() string {
	switch a.Kind {
	case ActorHolder:
		return fmt.Sprintf("%s (%s of account %s)", a.Identity, a.Role, a.Account)
	case ActorScanner:
		return "secret scanning (" + a.Identity + ")"
	}
	return strings.TrimSpace("operator " + a.Identity)
}
