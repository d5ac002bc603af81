package keys

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
)

// Storage layout, under the prefix given to NewManager (modelgate uses
// "modelgate"):
//
//	keys/<key id>.json          the record of a key: its fields and the
//	                            SHA-256 of its secret, never the secret
//	key_digests/<hex sha256>    the digest index: the id of the key with
//	                            that digest (digests.go)
//
// Locks (the storage's own) are named "<prefix>_key_<key id>"; a record is
// changed only under its lock.

// idPrefix starts every key ID.
const idPrefix = "key_"

// newID returns a new key ID: idPrefix, then 24 characters that sort by
// creation time.
func newID(now time.Time) string { return ids.New(idPrefix, now) }

// validID reports whether id looks like one newID made, so that an ID from
// a URL never becomes a path outside the keys folder.
func validID(id string) bool { return ids.Valid(id, idPrefix) }

func (m *Manager) recordKey(id string) string { return m.dir + "/" + id + ".json" }

func (m *Manager) lockName(id string) string { return m.prefix + "_key_" + id }

// record is what storage holds of a key: its fields and the hex SHA-256 of
// its secret.
type record struct {
	keyFields
	SHA256 string `json:"sha256"`
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
		return Key{}, digest, fmt.Errorf("%w %s: %w", errCorrupt, id, err)
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
	if storage.IsNotExist(err) {
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
	if err != nil && !storage.IsNotExist(err) {
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

// withLock runs f holding the storage lock of the key id.
func (m *Manager) withLock(ctx context.Context, id string, f func() error) error {
	unlock, err := storage.Lock(ctx, m.storage, m.lockName(id))
	if err != nil {
		return fmt.Errorf("locking key %s: %w", id, err)
	}
	defer unlock()
	return f()
}
