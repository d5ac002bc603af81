package keys

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/modelgate/modelgate/internal/storage"
)

// The digest index finds a key by the digest of its secret without reading
// every record: anyone can write well-formed keys (the checksum is public),
// so a lookup of one that exists nowhere must cost one read, whatever the
// number of keys. Each key has, besides its record,
//
//	key_digests/<hex sha256>   {"id": "<key id>"}
//
// written by Create before the record and removed by Delete after it, so a
// record never goes without its index record; one left behind (a crash
// between the two writes, a delete that failed half way) names a key that
// is gone and is harmless, as a lookup checks the key's own record. Keys
// stored without one (by an earlier version) get theirs at the next
// Refresh of any Manager on the storage.

// digestRecord is what the index holds of a digest.
type digestRecord struct {
	ID string `json:"id"`
}

func (m *Manager) digestKey(digest [32]byte) string {
	return path.Join(m.prefix, "key_digests", hex.EncodeToString(digest[:]))
}

// storeDigest writes the index record of the key id with this digest.
func (m *Manager) storeDigest(ctx context.Context, id string, digest [32]byte) error {
	b, err := json.Marshal(digestRecord{ID: id})
	if err != nil {
		return err
	}
	if err := m.storage.Store(ctx, m.digestKey(digest), b); err != nil {
		return fmt.Errorf("storing the digest index of key %s: %w", id, err)
	}
	return nil
}

// digestID returns the key id the index names for this digest; "" when it
// names none. A record that cannot be read names none: the key's own
// record is the authority, and Refresh writes the index record again.
func (m *Manager) digestID(ctx context.Context, digest [32]byte) (string, error) {
	b, err := m.storage.Load(ctx, m.digestKey(digest))
	if storage.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("loading a digest index record: %w", err)
	}
	var r digestRecord
	if json.Unmarshal(b, &r) != nil || !validID(r.ID) {
		return "", nil //nolint:nilerr // an unreadable record names no key; Refresh writes it again
	}
	return r.ID, nil
}

// deleteDigest removes the index record of the key id with this digest,
// if it names that key (a copied record's twin may own it).
func (m *Manager) deleteDigest(ctx context.Context, id string, digest [32]byte) error {
	named, err := m.digestID(ctx, digest)
	if err != nil || named != id {
		return err
	}
	if err := m.storage.Delete(ctx, m.digestKey(digest)); err != nil && !storage.IsNotExist(err) {
		return fmt.Errorf("deleting the digest index of key %s: %w", id, err)
	}
	return nil
}

// findStored finds the key with this digest in storage through the digest
// index: one read for a digest no key has, two for a key.
func (m *Manager) findStored(ctx context.Context, digest [32]byte) (Key, bool, error) {
	id, err := m.digestID(ctx, digest)
	if err != nil || id == "" {
		return Key{}, false, err
	}
	return m.loadDigest(ctx, id, digest)
}

// loadDigest reads the key id from storage, if it is still there and still
// has this digest.
func (m *Manager) loadDigest(ctx context.Context, id string, digest [32]byte) (Key, bool, error) {
	k, d, err := m.load(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errCorrupt):
		return Key{}, false, nil
	case err != nil:
		return Key{}, false, err
	}
	return k, d == digest, nil
}

// indexDigests writes the digest index records that keys of x lack: keys
// stored by an earlier version, or by an instance running one. It looks
// at each key once per Manager (Create and Delete keep the records of
// this Manager's keys); an error is reported and that key looked at again
// at the next Refresh.
func (m *Manager) indexDigests(ctx context.Context, x *index) []error {
	m.digestsMu.Lock()
	var todo []*entry
	for id, e := range x.byID {
		if !m.digestsIndexed[id] {
			todo = append(todo, e)
		}
	}
	// Keys gone from the index are forgotten, so a key deleted elsewhere
	// does not keep its place in memory.
	for id := range m.digestsIndexed {
		if x.byID[id] == nil {
			delete(m.digestsIndexed, id)
		}
	}
	m.digestsMu.Unlock()

	var errs []error
	for _, e := range todo {
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
		id, err := m.digestID(ctx, e.digest)
		if err == nil && id != e.key.ID {
			err = m.storeDigest(ctx, e.key.ID, e.digest)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.markIndexed(e.key.ID, true)
	}
	return errs
}

// markIndexed notes that the key id has its digest index record (or, with
// false, that it is gone).
func (m *Manager) markIndexed(id string, indexed bool) {
	m.digestsMu.Lock()
	defer m.digestsMu.Unlock()
	if !indexed {
		delete(m.digestsIndexed, id)
		return
	}
	if m.digestsIndexed == nil {
		m.digestsIndexed = make(map[string]bool)
	}
	m.digestsIndexed[id] = true
}
