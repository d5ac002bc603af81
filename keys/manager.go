package keys

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Storage is the subset of certmagic.Storage the Manager uses. Load returns
// an error wrapping fs.ErrNotExist for a missing key. Lock blocks until the
// lock is held or ctx ends; a lock is held across processes that share the
// storage.
type Storage interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	Exists(ctx context.Context, key string) bool
	List(ctx context.Context, path string, recursive bool) ([]string, error)
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// Key is a managed key as the admin API shows it: never the secret, never
// its digest.
type Key struct {
	ID         string    `json:"id"` // "key_" + a sortable unique id
	Name       string    `json:"name"`
	Owner      string    `json:"owner"`
	Hint       string    `json:"hint"`
	Models     []string  `json:"models"`     // empty or nil: every model
	CreatedAt  int64     `json:"created_at"` // unix seconds
	LastUsedAt *int64    `json:"last_used_at"`
	ExpiresAt  *int64    `json:"expires_at"`
	ExposedAt  *int64    `json:"exposed_at"`
	Exposure   *Exposure `json:"exposure,omitempty"`
}

// keyFields is Key without its methods, for encoding it plainly.
type keyFields Key

// MarshalJSON encodes the key with "models" as [] rather than null.
func (k Key) MarshalJSON() ([]byte, error) {
	f := keyFields(k)
	if f.Models == nil {
		f.Models = []string{}
	}
	return json.Marshal(f)
}

// clone returns a copy of k that shares no memory with it.
func (k Key) clone() Key {
	if k.Models != nil {
		k.Models = append([]string{}, k.Models...)
	}
	k.LastUsedAt = cloneInt(k.LastUsedAt)
	k.ExpiresAt = cloneInt(k.ExpiresAt)
	k.ExposedAt = cloneInt(k.ExposedAt)
	if k.Exposure != nil {
		e := *k.Exposure
		k.Exposure = &e
	}
	return k
}

func cloneInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Exposure is where a leaked key was reported.
type Exposure struct {
	Reporter string `json:"reporter"` // "github", "gitlab"
	Type     string `json:"type"`
	URL      string `json:"url"`
	Source   string `json:"source"`
}

// NewKey is a create request (also the admin API's POST body).
type NewKey struct {
	Name string `json:"name"`
	// Owner defaults to Name: as for static keys, a key without an owner
	// owns what it creates.
	Owner     string   `json:"owner,omitempty"`
	Models    []string `json:"models,omitempty"`
	ExpiresAt *int64   `json:"expires_at,omitempty"` // unix seconds, must be in the future
}

// ErrNotFound is returned for a key that does not exist.
var ErrNotFound = errors.New("key not found")

// InvalidError is a refused create; Param names the field ("name",
// "owner", "models[1]", "expires_at"). Create returns it as *InvalidError;
// errors.As finds it with a target of either *InvalidError or
// **InvalidError.
type InvalidError struct{ Param, Message string }

func (e InvalidError) Error() string { return "invalid " + e.Param + ": " + e.Message }

// As lets errors.As fill a plain InvalidError from an *InvalidError.
func (e *InvalidError) As(target any) bool {
	if t, ok := target.(*InvalidError); ok && e != nil {
		*t = *e
		return true
	}
	return false
}

// Limits of a create request.
const (
	maxNameLen = 64  // characters of a name or an owner
	maxModels  = 100 // entries of models
)

// record is what storage holds of a key: its fields and the hex SHA-256 of
// its secret.
type record struct {
	keyFields
	SHA256 string `json:"sha256"`
}

// usage is a key's last use as this process saw it.
type usage struct {
	used    atomic.Int64 // unix seconds of the last Touch; 0 for none
	written atomic.Int64 // unix seconds when this process last wrote last_used_at; 0 for never
}

// entry is one key of the index. It is never changed once in an index.
type entry struct {
	key    Key
	digest [32]byte
	use    *usage // shared by the entries of one ID across index versions
}

// index is an immutable snapshot of the keys; changes make a new one.
type index struct {
	byDigest map[[32]byte]*entry
	byID     map[string]*entry
}

func newIndex(n int) *index {
	return &index{byDigest: make(map[[32]byte]*entry, n), byID: make(map[string]*entry, n)}
}

func (x *index) copy(extra int) *index {
	y := newIndex(len(x.byID) + extra)
	for _, e := range x.byID {
		y.put(e)
	}
	return y
}

func (x *index) put(e *entry) {
	if old := x.byID[e.key.ID]; old != nil {
		delete(x.byDigest, old.digest)
	}
	x.byID[e.key.ID] = e
	x.byDigest[e.digest] = e
}

func (x *index) remove(id string) {
	if old := x.byID[id]; old != nil {
		delete(x.byDigest, old.digest)
		delete(x.byID, id)
	}
}

// change is a local change to the index made while a Refresh was reading
// storage; the Refresh applies it again to what it read.
type change struct {
	op    int // opCreate, opUpdate or opDelete
	entry *entry
	id    string
}

const (
	opCreate = iota // add the entry
	opUpdate        // replace the entry of its ID, if that is still there
	opDelete        // remove the ID
)

// Manager keeps managed keys in a Storage and an in-memory index of them
// that Lookup reads on every request. Several Managers, in one process or
// many, may share a storage; each sees the others' creates and deletes at
// its next Refresh.
type Manager struct {
	// Now is the clock; it defaults to time.Now. Tests set it.
	Now func() time.Time

	storage Storage
	prefix  string // the storage prefix, without slashes at its ends
	dir     string // <prefix>/keys

	idx atomic.Pointer[index]

	mu        sync.Mutex // held while the index is replaced; guards the fields below
	recording bool       // a Refresh is reading storage: note changes
	changes   []change

	refreshing sync.Mutex // one Refresh at a time
}

// NewManager keeps keys under <prefix>/keys/ in s (prefix is "modelgate" in
// production). It starts with an empty index: call Refresh to load it.
func NewManager(s Storage, prefix string) *Manager {
	prefix = strings.Trim(prefix, "/")
	m := &Manager{Now: time.Now, storage: s, prefix: prefix, dir: path.Join(prefix, "keys")}
	m.idx.Store(newIndex(0))
	return m
}

func (m *Manager) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

func (m *Manager) recordKey(id string) string { return m.dir + "/" + id + ".json" }

func (m *Manager) lockName(id string) string { return m.prefix + "_key_" + id }

// isNotExist reports whether err says a storage key does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// update applies a change to the index at once, and notes it for a Refresh
// under way.
func (m *Manager) update(c change) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.idx.Load()
	extra := 0
	if c.op == opCreate {
		extra = 1
	}
	y := x.copy(extra)
	apply(y, c)
	m.idx.Store(y)
	if m.recording {
		m.changes = append(m.changes, c)
	}
}

// apply makes a change to an index being built.
func apply(x *index, c change) {
	switch c.op {
	case opCreate:
		x.put(c.entry)
	case opUpdate:
		old := x.byID[c.entry.key.ID]
		if old == nil {
			return
		}
		e := *c.entry
		e.use = old.use
		x.put(&e)
	case opDelete:
		x.remove(c.id)
	}
}

// checkText says what is wrong with a name or owner, or "".
func checkText(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if utf8.RuneCountInString(s) > maxNameLen {
		return fmt.Sprintf("must be at most %d characters", maxNameLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}

// validate checks a create request at the time now.
func validate(nk NewKey, now time.Time) error {
	if msg := checkText(nk.Name); msg != "" {
		return &InvalidError{Param: "name", Message: "name " + msg}
	}
	if nk.Owner != "" {
		if msg := checkText(nk.Owner); msg != "" {
			return &InvalidError{Param: "owner", Message: "owner " + msg}
		}
	}
	if len(nk.Models) > maxModels {
		return &InvalidError{Param: "models", Message: fmt.Sprintf("models may list at most %d models", maxModels)}
	}
	for i, model := range nk.Models {
		if model == "" {
			p := fmt.Sprintf("models[%d]", i)
			return &InvalidError{Param: p, Message: p + " must not be empty"}
		}
	}
	if nk.ExpiresAt != nil && *nk.ExpiresAt <= now.Unix() {
		return &InvalidError{Param: "expires_at", Message: "expires_at must be in the future"}
	}
	return nil
}

// Create validates nk, generates a secret, stores the key (its digest, never
// the secret) and adds it to the index at once. It returns the key and the
// secret, which is shown this once. A refused request is an *InvalidError.
func (m *Manager) Create(ctx context.Context, nk NewKey) (Key, string, error) {
	now := m.now()
	if err := validate(nk, now); err != nil {
		return Key{}, "", err
	}
	secret, err := Generate()
	if err != nil {
		return Key{}, "", fmt.Errorf("generating a key: %w", err)
	}
	owner := nk.Owner
	if owner == "" {
		owner = nk.Name
	}
	k := Key{
		ID:        newID(now),
		Name:      nk.Name,
		Owner:     owner,
		Hint:      Hint(secret),
		Models:    append([]string{}, nk.Models...),
		CreatedAt: now.Unix(),
		ExpiresAt: cloneInt(nk.ExpiresAt),
	}
	digest := Digest(secret)
	if err := m.store(ctx, k, digest); err != nil {
		return Key{}, "", err
	}
	m.update(change{op: opCreate, entry: &entry{key: k.clone(), digest: digest, use: new(usage)}})
	return k, secret, nil
}

// store writes the record of a key.
func (m *Manager) store(ctx context.Context, k Key, digest [32]byte) error {
	r := record{keyFields: keyFields(k), SHA256: hex.EncodeToString(digest[:])}
	if r.Models == nil {
		r.Models = []string{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := m.storage.Store(ctx, m.recordKey(k.ID), b); err != nil {
		return fmt.Errorf("storing key %s: %w", k.ID, err)
	}
	return nil
}

// errCorrupt marks a record that cannot be read.
var errCorrupt = errors.New("corrupt key record")

// parse decodes the record of the key id.
func parse(id string, b []byte) (Key, [32]byte, error) {
	var r record
	var digest [32]byte
	if err := json.Unmarshal(b, &r); err != nil {
		return Key{}, digest, fmt.Errorf("%w %s: %v", errCorrupt, id, err)
	}
	if r.ID != id {
		return Key{}, digest, fmt.Errorf("%w %s: it holds the id %q", errCorrupt, id, r.ID)
	}
	if len(r.SHA256) != 2*len(digest) {
		return Key{}, digest, fmt.Errorf("%w %s: bad sha256", errCorrupt, id)
	}
	if _, err := hex.Decode(digest[:], []byte(r.SHA256)); err != nil {
		return Key{}, digest, fmt.Errorf("%w %s: bad sha256", errCorrupt, id)
	}
	return Key(r.keyFields), digest, nil
}

// load reads the key id from storage; ErrNotFound if it is not there.
func (m *Manager) load(ctx context.Context, id string) (Key, [32]byte, error) {
	b, err := m.storage.Load(ctx, m.recordKey(id))
	if isNotExist(err) {
		return Key{}, [32]byte{}, ErrNotFound
	}
	if err != nil {
		return Key{}, [32]byte{}, fmt.Errorf("loading key %s: %w", id, err)
	}
	return parse(id, b)
}

// stored is a key as read from storage, or the error of reading it.
type stored struct {
	key    Key
	digest [32]byte
	err    error // errCorrupt: the record exists but cannot be read
}

// loadAll reads every key record in storage. A record that cannot be parsed
// is returned with its error; an error reading storage fails the whole.
func (m *Manager) loadAll(ctx context.Context) ([]stored, error) {
	names, err := m.storage.List(ctx, m.dir, false)
	if err != nil && !isNotExist(err) {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	out := make([]stored, 0, len(names))
	for _, name := range names {
		// Anything else in the folder (a storage's temporary file, say)
		// is not a key.
		id, ok := strings.CutSuffix(path.Base(name), ".json")
		if !ok || !validID(id) {
			continue
		}
		k, digest, err := m.load(ctx, id)
		switch {
		case err == nil:
			out = append(out, stored{key: k, digest: digest})
		case errors.Is(err, ErrNotFound):
			// deleted since the listing
		case errors.Is(err, errCorrupt):
			out = append(out, stored{key: Key{ID: id}, err: err})
		default:
			return nil, err
		}
	}
	return out, nil
}

// List reads every key from storage, oldest first (created_at, then id).
func (m *Manager) List(ctx context.Context) ([]Key, error) {
	all, err := m.loadAll(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	list := make([]Key, 0, len(all))
	for _, s := range all {
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		list = append(list, m.withUse(s.key))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].CreatedAt != list[j].CreatedAt {
			return list[i].CreatedAt < list[j].CreatedAt
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}

// Get reads the key id from storage; ErrNotFound if there is none.
func (m *Manager) Get(ctx context.Context, id string) (Key, error) {
	if !validID(id) {
		return Key{}, ErrNotFound
	}
	k, _, err := m.load(ctx, id)
	return m.withUse(k), err
}

// withUse gives k the last use this process noted, when it is later than
// the stored one (which is written at most once a minute).
func (m *Manager) withUse(k Key) Key {
	e := m.idx.Load().byID[k.ID]
	if e == nil {
		return k
	}
	if used := e.use.used.Load(); used != 0 && (k.LastUsedAt == nil || *k.LastUsedAt < used) {
		k.LastUsedAt = &used
	}
	return k
}

// withLock runs f holding the storage lock of the key id.
func (m *Manager) withLock(ctx context.Context, id string, f func() error) error {
	name := m.lockName(id)
	if err := m.storage.Lock(ctx, name); err != nil {
		return fmt.Errorf("locking key %s: %w", id, err)
	}
	defer func() {
		// A lock is released even after ctx ended.
		_ = m.storage.Unlock(context.WithoutCancel(ctx), name)
	}()
	return f()
}

// Delete removes the key from storage and from the index at once;
// ErrNotFound if there is no such key.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	err := m.withLock(ctx, id, func() error {
		// Some storages (certmagic's FileStorage) delete a missing key
		// without complaint, so look first.
		if !m.storage.Exists(ctx, m.recordKey(id)) {
			return ErrNotFound
		}
		if err := m.storage.Delete(ctx, m.recordKey(id)); err != nil {
			if isNotExist(err) {
				return ErrNotFound
			}
			return fmt.Errorf("deleting key %s: %w", id, err)
		}
		return nil
	})
	if err == nil || errors.Is(err, ErrNotFound) {
		// Gone from storage either way: this instance forgets it too.
		m.update(change{op: opDelete, id: id})
	}
	return err
}

// Lookup returns the key with this digest from the in-memory index; false
// for an unknown or expired key. It reads no storage, allocates nothing and
// is safe for concurrent use. The Key shares its Models and pointer fields
// with the index: read them, never change them.
func (m *Manager) Lookup(digest [32]byte) (Key, bool) {
	e := m.idx.Load().byDigest[digest]
	if e == nil {
		return Key{}, false
	}
	if e.key.ExpiresAt != nil && *e.key.ExpiresAt <= m.now().Unix() {
		return Key{}, false
	}
	return e.key, true
}

// Touch notes that the key id was used now. It changes memory only; the
// next Refresh writes it to storage.
func (m *Manager) Touch(id string) {
	e := m.idx.Load().byID[id]
	if e == nil {
		return
	}
	now := m.now().Unix()
	// Most calls find the time already noted and write nothing shared.
	for {
		used := e.use.used.Load()
		if used >= now || e.use.used.CompareAndSwap(used, now) {
			return
		}
	}
}

// usedInterval is how often at most one Manager writes the last use of one
// key.
const usedInterval = 60 // seconds

// Refresh writes last_used_at of the keys used since it was last written
// (at most once a minute per key, and only to records that still exist),
// then reloads the index from storage: this is how keys created or deleted
// by other Managers sharing the storage arrive. If storage cannot be read
// the index stays as it was. A record that cannot be parsed is reported in
// the error; the index keeps what it knew of that key.
func (m *Manager) Refresh(ctx context.Context) error {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()

	errs := m.writeUsage(ctx)

	m.mu.Lock()
	m.recording, m.changes = true, nil
	m.mu.Unlock()

	all, err := m.loadAll(ctx)

	m.mu.Lock()
	defer m.mu.Unlock()
	changes := m.changes
	m.recording, m.changes = false, nil
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	old := m.idx.Load()
	x := newIndex(len(all))
	var dup map[[32]byte]bool
	for _, s := range all {
		if s.err != nil {
			errs = append(errs, s.err)
			if e := old.byID[s.key.ID]; e != nil {
				x.put(e)
			}
			continue
		}
		if prev := x.byDigest[s.digest]; prev != nil || dup[s.digest] {
			// Two records with one digest cannot come from Create (a
			// copied file, say): refuse the secret rather than pick one.
			errs = append(errs, fmt.Errorf("%w %s: its sha256 is another key's", errCorrupt, s.key.ID))
			if prev != nil {
				x.remove(prev.key.ID)
			}
			if dup == nil {
				dup = make(map[[32]byte]bool)
			}
			dup[s.digest] = true
			continue
		}
		e := &entry{key: s.key, digest: s.digest}
		if o := old.byID[s.key.ID]; o != nil {
			e.use = o.use
		} else {
			e.use = new(usage)
		}
		x.put(e)
	}
	for _, c := range changes {
		apply(x, c)
	}
	m.idx.Store(x)
	return errors.Join(errs...)
}

// writeUsage writes last_used_at of the keys used since it was last
// written, each under its lock and only if the record still exists.
func (m *Manager) writeUsage(ctx context.Context) []error {
	var errs []error
	now := m.now().Unix()
	for id, e := range m.idx.Load().byID {
		used := e.use.used.Load()
		if used == 0 || (e.key.LastUsedAt != nil && *e.key.LastUsedAt >= used) {
			continue
		}
		if w := e.use.written.Load(); w != 0 && now-w < usedInterval {
			continue
		}
		err := m.withLock(ctx, id, func() error {
			k, digest, err := m.load(ctx, id)
			if err != nil {
				return err
			}
			if k.LastUsedAt != nil && *k.LastUsedAt >= used {
				return nil
			}
			k.LastUsedAt = &used
			return m.store(ctx, k, digest)
		})
		switch {
		case err == nil:
			e.use.written.Store(now)
		case errors.Is(err, ErrNotFound):
			// deleted elsewhere: never write it back
		default:
			errs = append(errs, fmt.Errorf("writing when key %s was last used: %w", id, err))
		}
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
	}
	return errs
}

// FindByDigest finds the key with this digest in storage, the authority
// for leak reports: unlike Lookup it sees keys other Managers created since
// the last Refresh, and expired keys.
func (m *Manager) FindByDigest(ctx context.Context, digest [32]byte) (Key, bool, error) {
	if e := m.idx.Load().byDigest[digest]; e != nil {
		k, d, err := m.load(ctx, e.key.ID)
		if err == nil && d == digest {
			return k, true, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, errCorrupt) {
			return Key{}, false, err
		}
	}
	all, err := m.loadAll(ctx)
	if err != nil {
		return Key{}, false, err
	}
	for _, s := range all {
		if s.err == nil && s.digest == digest {
			return s.key, true, nil
		}
	}
	return Key{}, false, nil
}

// MarkExposed notes that the key id was reported leaked: the first report
// sets exposed_at and the exposure (first is true); later reports keep both
// as they are. It works under the key's storage lock and updates the index.
// ErrNotFound if there is no such key.
func (m *Manager) MarkExposed(ctx context.Context, id string, e Exposure) (k Key, first bool, err error) {
	if !validID(id) {
		return Key{}, false, ErrNotFound
	}
	var digest [32]byte
	err = m.withLock(ctx, id, func() error {
		k, digest, err = m.load(ctx, id)
		if err != nil || k.ExposedAt != nil {
			return err
		}
		now := m.now().Unix()
		k.ExposedAt = &now
		k.Exposure = &e
		first = true
		return m.store(ctx, k, digest)
	})
	if err != nil {
		return Key{}, false, err
	}
	m.update(change{op: opUpdate, entry: &entry{key: k.clone(), digest: digest}})
	return k, first, nil
}
