package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
)

// ActorKind is who made a change.
type ActorKind string

// The actors.
const (
	// ActorHolder is an account holder, signed in to the key settings
	// page.
	ActorHolder ActorKind = "account_holder"
	// ActorOperator is the operator: the admin endpoint, and the caddy
	// modelgate commands that talk to it.
	ActorOperator ActorKind = "operator"
	// ActorScanner is secret scanning: a code host's alert, or a key the
	// gateway found in a request.
	ActorScanner ActorKind = "secret_scanner"
)

// Actor is who acts: an account holder in an account with a role, the
// operator, or secret scanning. Its methods are the authorization
// decisions.
type Actor struct {
	Kind ActorKind `json:"type"`
	// Identity is the account holder's identity, or what names the
	// operator's or the scanner's channel ("admin API", "github").
	Identity string `json:"identity,omitempty"`
	// Account and Role are an account holder's.
	Account string `json:"account,omitempty"`
	Role    Role   `json:"role,omitempty"`
	// From is where the request came from: the client's address.
	From string `json:"from,omitempty"`
}

// Operator returns the operator as an actor, acting from from.
func Operator(via, from string) Actor {
	return Actor{Kind: ActorOperator, Identity: via, From: from}
}

// Scanner returns secret scanning as an actor: reporter is "github",
// "gitlab" or "modelgate".
func Scanner(reporter string) Actor { return Actor{Kind: ActorScanner, Identity: reporter} }

// Entry is one change in the audit log: who, when, from where, what, and
// the object before and after. It never holds a secret: keys appear as
// the admin API shows them (no secret, no digest).
type Entry struct {
	ID      string `json:"id"`   // "aud_" and a sortable id
	Time    string `json:"time"` // RFC 3339, UTC, milliseconds
	Account string `json:"account"`
	Actor   Actor  `json:"actor"`
	// Action is what changed: key.created, key.limits_set, key.deleted,
	// key.exposed, account.updated, account.suspended, account.resumed,
	// account.deleted, account.contact_recorded, member.added,
	// member.updated, member.removed.
	Action string `json:"action"`
	Target Target `json:"target"`
	// Before and After are the object as it was and as it became; one of
	// them is null for a creation or a deletion.
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// Target is what an entry is about.
type Target struct {
	Type string `json:"type"` // "key", "account" or "member"
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// AuditLog keeps the audit entries in a Storage, under each account:
//
//	audit/<hex of 16 bytes of the account's SHA-256>/<UTC day>/<entry id>.json
//
// so that reading an account's latest entries lists few folders, and
// dropping what is older than the retention deletes whole days.
type AuditLog struct {
	// Now is the clock; it defaults to time.Now.
	Now func() time.Time
	// Retention is how long entries are kept; 0 keeps them for ever.
	Retention time.Duration
	// Emit, when set, is told every entry once it is stored, or once
	// storing it failed (err is then set): the gateway emits it as an
	// event and counts it.
	Emit func(e Entry, err error)

	storage Storage
	dir     string
}

// NewAuditLog keeps entries under <prefix>/audit/ in s.
func NewAuditLog(s Storage, prefix string) *AuditLog {
	return &AuditLog{Now: time.Now, storage: s, dir: path.Join(strings.Trim(prefix, "/"), "audit")}
}

func (l *AuditLog) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

const entryPrefix = "aud_"

const dayLayout = "2006-01-02"

func (l *AuditLog) accountDir(account string) string { return path.Join(l.dir, hashID(account)) }

// Record stores an entry made now, with before and after as JSON (nil:
// null), and tells Emit. A failure to store it is returned (and told):
// the change it records has happened all the same.
func (l *AuditLog) Record(ctx context.Context, account string, actor Actor, action string, target Target, before, after any) (Entry, error) {
	now := l.now().UTC()
	e := Entry{ID: ids.New(entryPrefix, now), Time: now.Format("2006-01-02T15:04:05.000Z07:00"), Account: account,
		Actor: actor, Action: action, Target: target, Before: rawJSON(before), After: rawJSON(after)}
	b, err := json.Marshal(e)
	if err == nil {
		key := path.Join(l.accountDir(account), now.Format(dayLayout), e.ID+".json")
		// The entry must not be lost to a request that ended: it is
		// written whatever the caller's context says now.
		err = l.storage.Store(context.WithoutCancel(ctx), key, b)
	}
	if err != nil {
		err = fmt.Errorf("storing audit entry %s (%s of %s %q): %w", e.ID, action, target.Type, target.ID, err)
	}
	if l.Emit != nil {
		l.Emit(e, err)
	}
	return e, err
}

func rawJSON(v any) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// ListOptions page through an account's entries, newest first.
type ListOptions struct {
	// Limit is the most entries returned: 1 to 1000, default 100.
	Limit int
	// Before, when set, returns the entries older than this entry id.
	Before string
}

// Page is a page of entries, newest first; HasMore says older ones exist.
type Page struct {
	Data    []Entry `json:"data"`
	HasMore bool    `json:"has_more"`
}

// List returns an account's entries, newest first. Entries that cannot be
// read are skipped and reported in the error beside the page.
func (l *AuditLog) List(ctx context.Context, account string, opt ListOptions) (Page, error) {
	limit := opt.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var beforeDay string
	if opt.Before != "" {
		if !ids.Valid(opt.Before, entryPrefix) {
			return Page{}, invalid("before", "before %q is not an audit entry id", opt.Before)
		}
		at, _ := ids.Time(opt.Before, entryPrefix)
		beforeDay = at.UTC().Format(dayLayout)
	}
	days, err := l.list(ctx, l.accountDir(account))
	if err != nil {
		return Page{}, err
	}
	page := Page{Data: []Entry{}}
	var errs []error
	for i := len(days) - 1; i >= 0; i-- {
		day := days[i]
		if beforeDay != "" && day > beforeDay {
			continue
		}
		names, err := l.list(ctx, path.Join(l.accountDir(account), day))
		if err != nil {
			return Page{}, err
		}
		for j := len(names) - 1; j >= 0; j-- {
			id, ok := strings.CutSuffix(names[j], ".json")
			if !ok || !ids.Valid(id, entryPrefix) || opt.Before != "" && id >= opt.Before {
				continue
			}
			if len(page.Data) == limit {
				page.HasMore = true
				return page, errors.Join(errs...)
			}
			b, err := l.storage.Load(ctx, path.Join(l.accountDir(account), day, names[j]))
			if storage.IsNotExist(err) {
				continue // pruned meanwhile
			}
			var e Entry
			if err == nil {
				err = json.Unmarshal(b, &e)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("reading audit entry %s: %w", id, err))
				continue
			}
			page.Data = append(page.Data, e)
		}
	}
	return page, errors.Join(errs...)
}

// list returns the last path element of each key under dir, sorted; a
// missing dir is an empty list.
func (l *AuditLog) list(ctx context.Context, dir string) ([]string, error) {
	keys, err := l.storage.List(ctx, dir, false)
	if err != nil && !storage.IsNotExist(err) {
		return nil, fmt.Errorf("listing the audit log: %w", err)
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, path.Base(k))
	}
	sort.Strings(names)
	return names, nil
}

// Prune deletes the days of every account that ended more than Retention
// ago, and returns how many it deleted. Several instances may prune at
// once: deleting what another deleted is harmless.
func (l *AuditLog) Prune(ctx context.Context) (int, error) {
	if l.Retention <= 0 {
		return 0, nil
	}
	// A day is kept while any of it is younger than the retention.
	oldest := l.now().UTC().Add(-l.Retention).Format(dayLayout)
	accounts, err := l.list(ctx, l.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, acct := range accounts {
		days, err := l.list(ctx, path.Join(l.dir, acct))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, day := range days {
			if _, perr := time.Parse(dayLayout, day); perr != nil || day >= oldest {
				continue
			}
			if err := l.storage.Delete(ctx, path.Join(l.dir, acct, day)); err != nil && !storage.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("pruning the audit log: %w", err))
				continue
			}
			n++
		}
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
	}
	return n, errors.Join(errs...)
}
