// Package storage is what the batch and keys engines need of a key-value
// storage: the subset of certmagic.Storage they use, and how they read its
// errors and take its locks. Caddy's storage modules satisfy Storage as they
// are; the engines import nothing of Caddy or certmagic for it.
package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
)

// Storage is the subset of certmagic.Storage the engines use. Load returns
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

// IsNotExist reports whether err says a storage key does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Locker is the locking half of Storage.
type Locker interface {
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// Lock takes the lock name of s, waiting as long as ctx lets it. It returns
// the function that releases the lock; that function releases it even
// after ctx ended (a lock left held would block every other process until
// the storage deems it stale), and ignores the storage's error, as there is
// nothing the holder could do about it.
func Lock(ctx context.Context, s Locker, name string) (unlock func(), err error) {
	if err := s.Lock(ctx, name); err != nil {
		return nil, err
	}
	return func() { _ = s.Unlock(context.WithoutCancel(ctx), name) }, nil
}

// OwnerDir is the storage folder of everything an owner has under prefix
// (files, batches, stored responses): prefix/o/ and the first 16 bytes of
// the owner's SHA-256, in hex, so that no owner's name appears in a path.
func OwnerDir(prefix, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return path.Join(prefix, "o", hex.EncodeToString(sum[:16]))
}
