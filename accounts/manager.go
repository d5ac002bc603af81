package accounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
)

// Storage is what the Manager and the AuditLog need of a storage: the
// subset of certmagic.Storage the engines use.
type Storage = storage.Storage

// Storage layout, under the prefix given to NewManager (modelgate uses
// "modelgate"):
//
//	accounts/<hex of 16 bytes of the id's SHA-256>.json   an account's record
//
// Locks are named "<prefix>_account_<the same hex>"; a record is changed
// only under its lock. The id is hashed so that no account's name appears
// in a path, as storage.OwnerDir does for what owners keep.

// Manager keeps the account records in a Storage and an in-memory index of
// them, which the request path reads (Blocked, Lookup) without touching the
// storage. Several Managers may share a storage; each sees the others'
// changes at its next Refresh, or at once when told to Reload an id.
type Manager struct {
	// Now is the clock; it defaults to time.Now.
	Now func() time.Time
	// Changed, when set, is told the id of every account this Manager
	// changes, once the change is in storage: the gateway tells the
	// other instances, which Reload it at once.
	Changed func(id string)

	storage Storage
	prefix  string
	dir     string

	idx atomic.Pointer[index]

	mu        sync.Mutex // held while the index is replaced; guards below
	recording bool       // a Refresh is reading storage: note the ids changed
	dirty     map[string]bool

	refreshing sync.Mutex
}

// index is an immutable snapshot of the records.
type index struct {
	byID map[string]*Account
	// blocked holds the ids of suspended and deleted accounts: what the
	// request path asks.
	blocked map[string]bool
	// memberships are the run-time members' accounts, by identity,
	// sorted by account id.
	memberships map[string][]Membership
}

// Membership is an identity's role in an account.
type Membership struct {
	Account string `json:"account"`
	Role    Role   `json:"role"`
}

func buildIndex(all map[string]*Account) *index {
	x := &index{byID: all, blocked: map[string]bool{}, memberships: map[string][]Membership{}}
	for id, a := range all {
		if a.Blocked() {
			x.blocked[id] = true
		}
		if a.DeletedAt != nil {
			continue
		}
		for _, m := range a.Members {
			x.memberships[m.Identity] = append(x.memberships[m.Identity], Membership{Account: id, Role: m.Role})
		}
	}
	for _, ms := range x.memberships {
		sort.Slice(ms, func(i, j int) bool { return ms[i].Account < ms[j].Account })
	}
	return x
}

// NewManager keeps accounts under <prefix>/accounts/ in s. It starts with
// an empty index: call Refresh to load it.
func NewManager(s Storage, prefix string) *Manager {
	prefix = strings.Trim(prefix, "/")
	m := &Manager{Now: time.Now, storage: s, prefix: prefix, dir: path.Join(prefix, "accounts")}
	m.idx.Store(buildIndex(map[string]*Account{}))
	return m
}

func (m *Manager) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

func (m *Manager) recordKey(id string) string { return m.dir + "/" + hashID(id) + ".json" }
func (m *Manager) lockName(id string) string  { return m.prefix + "_account_" + hashID(id) }

// Blocked reports whether the account's keys are refused (suspended or
// deleted), from memory: it allocates nothing and is safe for concurrent
// use.
func (m *Manager) Blocked(id string) bool { return m.idx.Load().blocked[id] }

// Lookup returns the account's record from memory; false when it has
// none (an account with the defaults). The Account shares memory with the
// index: read it, never change it.
func (m *Manager) Lookup(id string) (Account, bool) {
	a := m.idx.Load().byID[id]
	if a == nil {
		return Account{ID: id}, false
	}
	return *a, true
}

// Memberships returns the accounts the identity was made a member of at
// run time, sorted by account id, from memory.
func (m *Manager) Memberships(identity string) []Membership {
	return m.idx.Load().memberships[identity]
}

// Records returns every record in memory, sorted by id.
func (m *Manager) Records() []Account {
	x := m.idx.Load()
	out := make([]Account, 0, len(x.byID))
	for _, a := range x.byID {
		out = append(out, a.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// errCorrupt marks a record that cannot be read.
var errCorrupt = errors.New("corrupt account record")

// load reads the record of id; found is false when it has none.
func (m *Manager) load(ctx context.Context, id string) (a Account, found bool, err error) {
	b, err := m.storage.Load(ctx, m.recordKey(id))
	if storage.IsNotExist(err) {
		return Account{ID: id}, false, nil
	}
	if err != nil {
		return Account{}, false, fmt.Errorf("loading account %q: %w", id, err)
	}
	if err := json.Unmarshal(b, (*accountFields)(&a)); err != nil {
		return Account{}, false, fmt.Errorf("%w %q: %w", errCorrupt, id, err)
	}
	if a.ID != id {
		return Account{}, false, fmt.Errorf("%w %q: it holds the id %q", errCorrupt, id, a.ID)
	}
	return a, true, nil
}

// Get reads the account's record from storage; an account without a
// record is returned with the defaults and found false.
func (m *Manager) Get(ctx context.Context, id string) (Account, bool, error) {
	return m.load(ctx, id)
}

// Update changes the account's record under its lock: f is given the
// record as stored (the defaults when there is none) and changes it, or
// returns an error to change nothing. The record is then stored (its
// CreatedAt and UpdatedAt kept up), the index updated and Changed told.
// It returns the record before and after.
func (m *Manager) Update(ctx context.Context, id string, f func(a *Account) error) (before, after Account, err error) {
	if msg := CheckID(id); msg != "" {
		return Account{}, Account{}, invalid("account", "account id %s", msg)
	}
	unlock, err := storage.Lock(ctx, m.storage, m.lockName(id))
	if err != nil {
		return Account{}, Account{}, fmt.Errorf("locking account %q: %w", id, err)
	}
	defer unlock()
	before, found, err := m.load(ctx, id)
	if err != nil {
		return Account{}, Account{}, err
	}
	after = before.clone()
	if err := f(&after); err != nil {
		return Account{}, Account{}, err
	}
	now := m.now().Unix()
	if !found {
		after.CreatedAt = now
	}
	after.ID, after.UpdatedAt = id, now
	b, err := json.Marshal(accountFields(after))
	if err != nil {
		return Account{}, Account{}, err
	}
	if err := m.storage.Store(ctx, m.recordKey(id), b); err != nil {
		return Account{}, Account{}, fmt.Errorf("storing account %q: %w", id, err)
	}
	m.put(id, &after)
	if m.Changed != nil {
		m.Changed(id)
	}
	return before, after.clone(), nil
}

// put replaces the record of id in the index (nil: removes it).
func (m *Manager) put(id string, a *Account) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.idx.Load().byID
	all := make(map[string]*Account, len(old)+1)
	for k, v := range old {
		all[k] = v
	}
	if a == nil {
		delete(all, id)
	} else {
		c := a.clone()
		all[id] = &c
	}
	m.idx.Store(buildIndex(all))
	if m.recording {
		m.dirty[id] = true
	}
}

// Reload reads the account id from storage into the index at once:
// another instance's Changed leads here.
func (m *Manager) Reload(ctx context.Context, id string) error {
	a, found, err := m.load(ctx, id)
	if err != nil {
		return err
	}
	if !found {
		m.put(id, nil)
		return nil
	}
	m.put(id, &a)
	return nil
}

// Refresh reloads the index from storage: how changes made by other
// Managers arrive when no message told of them. If storage cannot be read
// the index stays as it was; a record that cannot be parsed is reported
// and the index keeps what it knew of it.
func (m *Manager) Refresh(ctx context.Context) error {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()
	m.mu.Lock()
	m.recording, m.dirty = true, map[string]bool{}
	m.mu.Unlock()

	all, errs, err := m.loadAll(ctx)

	m.mu.Lock()
	dirty := m.dirty
	m.recording, m.dirty = false, nil
	if err != nil {
		m.mu.Unlock()
		return err
	}
	old := m.idx.Load().byID
	for id, a := range old {
		if errs[path.Base(m.recordKey(id))] != nil {
			all[id] = a
		}
	}
	// A change made here while storage was read may be missing from what
	// was read: the index has it.
	for id := range dirty {
		if a := old[id]; a != nil {
			all[id] = a
		} else {
			delete(all, id)
		}
	}
	m.idx.Store(buildIndex(all))
	m.mu.Unlock()
	var list []error
	for _, e := range errs {
		list = append(list, e)
	}
	return errors.Join(list...)
}

// loadAll reads every record; records that cannot be parsed are returned
// apart, by their file name.
func (m *Manager) loadAll(ctx context.Context) (map[string]*Account, map[string]error, error) {
	names, err := m.storage.List(ctx, m.dir, false)
	if err != nil && !storage.IsNotExist(err) {
		return nil, nil, fmt.Errorf("listing accounts: %w", err)
	}
	all := make(map[string]*Account, len(names))
	errs := map[string]error{}
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := m.storage.Load(ctx, name)
		if storage.IsNotExist(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, nil, fmt.Errorf("loading %s: %w", name, err)
		}
		var a Account
		if err := json.Unmarshal(b, (*accountFields)(&a)); err != nil || a.ID == "" || path.Base(m.recordKey(a.ID)) != path.Base(name) {
			errs[path.Base(name)] = fmt.Errorf("%w %s", errCorrupt, path.Base(name))
			continue
		}
		all[a.ID] = &a
	}
	return all, errs, nil
}
