package keys

import (
	"context"
)

// FindByDigest finds the key with this digest in storage, the authority
// for leak reports: unlike Lookup it sees keys other Managers created since
// the last Refresh (through the digest index), and expired keys. It reads
// the key's record and at most one index record, never every key: a
// digest no key has costs one read.
func (m *Manager) FindByDigest(ctx context.Context, digest [32]byte) (Key, bool, error) {
	if e := m.idx.Load().byDigest[digest]; e != nil {
		k, found, err := m.loadDigest(ctx, e.key.ID, digest)
		if err != nil || found {
			return k, found, err
		}
	}
	return m.findStored(ctx, digest)
}

// Known returns the key with this digest from the in-memory index, as
// Lookup does, expired keys included: whether a leak report could find it
// without reading storage. Like Lookup, it reads no storage and allocates
// nothing.
func (m *Manager) Known(digest [32]byte) (Key, bool) {
	e := m.idx.Load().byDigest[digest]
	if e == nil {
		return Key{}, false
	}
	return e.key, true
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
	if first {
		m.changed(id)
	}
	return k, first, nil
}
