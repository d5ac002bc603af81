package keys

import (
	"context"
	"errors"
)

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
	if first {
		m.changed(id)
	}
	return k, first, nil
}
