package keys

import (
	"context"
	"errors"
	"fmt"
)

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

// LookupID returns the key id from the in-memory index, as Lookup does by
// digest (expired keys included: a batch its key created runs on).
func (m *Manager) LookupID(id string) (Key, bool) {
	e := m.idx.Load().byID[id]
	if e == nil {
		return Key{}, false
	}
	return e.key, true
}

// Reload reads the key id from storage into the index at once: added or
// updated when its record is there, removed when it is gone. Another
// instance's Changed leads here; Refresh remains the safety net that
// catches what such a message missed.
func (m *Manager) Reload(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	k, digest, err := m.load(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		m.update(change{op: opDelete, id: id})
		return nil
	case err != nil:
		return err
	}
	m.mu.Lock()
	old := m.idx.Load().byID[id]
	m.mu.Unlock()
	e := &entry{key: k.clone(), digest: digest, use: new(usage)}
	if old != nil {
		e.use = old.use
	}
	m.update(change{op: opCreate, entry: e})
	return nil
}

// Refresh writes last_used_at of the keys used since it was last written
// (at most once a minute per key, and only to records that still exist),
// then reloads the index from storage: this is how keys created or deleted
// by other Managers sharing the storage arrive. If storage cannot be read
// the index stays as it was. A record that cannot be parsed is reported in
// the error; the index keeps what it knew of that key. Last, it writes the
// digest index records that keys stored by an earlier version lack, so
// that FindByDigest finds them on every instance.
func (m *Manager) Refresh(ctx context.Context) error {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()

	errs := m.writeUsage(ctx)

	m.mu.Lock()
	m.recording, m.changes = true, nil
	m.mu.Unlock()

	all, err := m.loadAll(ctx)

	x, errs := m.rebuild(all, err, errs)
	if x != nil {
		errs = append(errs, m.indexDigests(ctx, x)...)
	}
	return errors.Join(errs...)
}

// rebuild makes the index of what Refresh read (all, or the error of
// reading it), with the changes made meanwhile, and installs it; nil if
// storage could not be read.
func (m *Manager) rebuild(all []stored, err error, errs []error) (*index, []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	changes := m.changes
	m.recording, m.changes = false, nil
	if err != nil {
		return nil, append(errs, err)
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
	return x, errs
}
