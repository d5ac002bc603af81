// Package accounts is the account holders' model: accounts (today's key
// owners), their members and roles, who may do what (authorization), and
// the audit log of every change. It keeps no passwords: an account holder
// is whoever the authentication in front of the key settings page says
// (a Principal), and Service.SignIn resolves that to an account and a
// role. It imports nothing of Caddy; the key administration modules adapt
// it to HTTP.
//
// An account's id is the owner of its keys (keys.Key.Owner): the keys,
// files, batches, stored responses and usage records of an owner are the
// account's, so keys that existed before accounts belong to them with no
// step to run.
package accounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/modelgate/modelgate/keys"
)

// Role is what a member may do in an account.
type Role string

// The roles, from the most to the least allowed.
const (
	// RoleOwner manages the account's keys, their limits (within the
	// account's ceilings) and its members.
	RoleOwner Role = "owner"
	// RoleAdmin manages the account's keys and their limits.
	RoleAdmin Role = "admin"
	// RoleMember manages the keys it created.
	RoleMember Role = "member"
	// RoleViewer reads the account: its keys, usage, batches, files,
	// members and audit log; it changes nothing.
	RoleViewer Role = "viewer"
)

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleMember, RoleViewer:
		return r, nil
	}
	return "", fmt.Errorf("role %q is not owner, admin, member or viewer", s)
}

// manages reports whether the role manages every key of the account.
func (r Role) manages() bool { return r == RoleOwner || r == RoleAdmin }

// Member is an identity given a role in an account at run time (members
// from the config are in Config).
type Member struct {
	Identity string `json:"identity"`
	Role     Role   `json:"role"`
	AddedAt  int64  `json:"added_at"` // unix seconds
}

// Contact is an identity that signed in to the account, with the e-mail
// address its sign-in carried: leak mail goes to the account's owners and
// admins through it.
type Contact struct {
	Identity string `json:"identity"`
	Email    string `json:"email"`
	Role     Role   `json:"role"`
	SeenAt   int64  `json:"seen_at"` // unix seconds of the sign-in that recorded it
}

// Account is an account's record. An account without a record is an
// account all the same, with the defaults: no members but its own
// identity, the configured ceilings, not suspended.
type Account struct {
	ID string `json:"id"`
	// Email is the address the operator gave the account; leak mail
	// goes there, and to its owners' and admins' Contacts.
	Email string `json:"email,omitempty"`
	// Limits and Budget are the account's ceilings: every request of its
	// keys counts against them, and no key of it may be given more by an
	// account holder. nil: the configured owner policy.
	Limits *keys.Limits `json:"limits,omitempty"`
	Budget *keys.Budget `json:"budget,omitempty"`
	// Members are the identities given a role at run time.
	Members  []Member  `json:"members"`
	Contacts []Contact `json:"contacts,omitempty"`
	// SuspendedAt, when set, stops every key of the account.
	SuspendedAt     *int64 `json:"suspended_at"`
	SuspendedReason string `json:"suspended_reason,omitempty"`
	// DeletedAt, when set, marks a deleted account: its keys are gone,
	// nobody signs in to it and no key is created for it again.
	DeletedAt *int64 `json:"deleted_at,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"`
	UpdatedAt int64  `json:"updated_at,omitempty"`
}

// accountFields is Account without its methods.
type accountFields Account

// MarshalJSON writes "members" as [] rather than null.
func (a Account) MarshalJSON() ([]byte, error) {
	f := accountFields(a)
	if f.Members == nil {
		f.Members = []Member{}
	}
	return json.Marshal(f)
}

// Blocked reports whether the account's keys are refused: it is
// suspended or deleted.
func (a Account) Blocked() bool { return a.SuspendedAt != nil || a.DeletedAt != nil }

// Policy is the account's own ceilings (nil fields: the configured ones).
func (a Account) Policy() keys.Policy { return keys.Policy{Limits: a.Limits, Budget: a.Budget} }

// member returns the run-time member of the identity.
func (a Account) member(identity string) (Member, bool) {
	for _, m := range a.Members {
		if m.Identity == identity {
			return m, true
		}
	}
	return Member{}, false
}

// clone returns a copy of a that shares no memory with it.
func (a Account) clone() Account {
	a.Members = slices.Clone(a.Members)
	a.Contacts = slices.Clone(a.Contacts)
	a.SuspendedAt = cloneInt(a.SuspendedAt)
	a.DeletedAt = cloneInt(a.DeletedAt)
	if a.Limits != nil {
		l := *a.Limits
		a.Limits = &l
	}
	if a.Budget != nil {
		b := *a.Budget
		a.Budget = &b
	}
	return a
}

func cloneInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Errors of the Service. The key administration answers ErrNotFound with
// 404, ErrForbidden, ErrSuspended and ErrDeleted with 403, ErrConflict
// with 409 and a *keys.InvalidError with 400.
var (
	ErrNotFound  = errors.New("not found")
	ErrForbidden = errors.New("forbidden")
	ErrSuspended = errors.New("the account is suspended")
	ErrDeleted   = errors.New("the account has been deleted")
	ErrConflict  = errors.New("conflict")
)

// maxIDLen bounds an account id or an identity, as keys bound owners.
const maxIDLen = 64

// CheckID says what is wrong with an account id or an identity, or "":
// the rules of a key's owner (non-empty UTF-8, at most 64 characters, no
// control characters), so that every owner can be an account.
func CheckID(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if utf8.RuneCountInString(s) > maxIDLen {
		return fmt.Sprintf("must be at most %d characters", maxIDLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}

// invalid is a refused field, as keys reports them.
func invalid(param, format string, args ...any) error {
	return &keys.InvalidError{Param: param, Message: fmt.Sprintf(format, args...)}
}
