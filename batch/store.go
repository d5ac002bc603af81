// Package batch is modelgate's batch engine: OpenAI's Files and Batch APIs
// over a key-value storage, and the runner that executes batches in the
// background, shares their work between instances and survives crashes and
// config reloads.
//
// It imports nothing of Caddy. Storage is any value with the methods of
// certmagic.Storage that batch uses (Caddy's storage modules satisfy it as
// they are); requests run through an Executor that the caller supplies.
//
// Storage layout, under the prefix given to NewStore (modelgate uses
// "modelgate"):
//
//	o/<owner>/files/<file id>/meta.json        the File object and its owner
//	o/<owner>/files/<file id>/<n>              the content, in parts of ChunkSize bytes
//	o/<owner>/batches/<batch id>/batch.json    the Batch object, as last persisted
//	o/<owner>/batches/<batch id>/cancel        present once a cancel was asked for
//	o/<owner>/batches/<batch id>/claims.json   the work parts: done, leased, progress
//	o/<owner>/batches/<batch id>/input/<n>     the validated request lines of part n
//	o/<owner>/batches/<batch id>/results/<n>/<writer>-<seq>   checkpoints of part n
//	active/<batch id>                          batches not yet in a final state
//
// The file contents (<n> under files/) and the work parts and checkpoints
// (input/ and results/ under batches/) are the bulk bytes; WithFileStorage
// keeps them in a storage of their own, under the same keys.
//
// <owner> is a hash of the owner's name, so any name is a safe key. Locks
// (the storage's own) are named "modelgate_batch_<batch id>".
package batch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// Storage is the subset of certmagic.Storage the engine uses. Load returns an
// error wrapping fs.ErrNotExist for a missing key. Lock blocks until the
// lock is held or ctx ends; a lock is held across processes that share the
// storage.
type Storage interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	Exists(ctx context.Context, key string) bool
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// Store keeps files and batches in a Storage.
type Store struct {
	storage Storage
	files   FileStorage // bulk bytes; storage unless WithFileStorage
	prefix  string

	separateFiles bool // files is not storage

	// now is the clock; tests replace it.
	now func() time.Time
}

// NewStore returns a Store keeping its data under prefix in s (and its
// bulk bytes too, unless an option puts them elsewhere).
func NewStore(s Storage, prefix string, opts ...Option) *Store {
	st := &Store{storage: s, files: s, prefix: strings.Trim(prefix, "/"), now: time.Now}
	for _, o := range opts {
		o(st)
	}
	return st
}

// ownerDir is the storage folder of an owner's files and batches.
func (s *Store) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return path.Join(s.prefix, "o", hex.EncodeToString(sum[:16]))
}

func (s *Store) fileDir(owner, id string) string {
	return path.Join(s.ownerDir(owner), "files", id)
}

func (s *Store) batchDir(owner, id string) string {
	return path.Join(s.ownerDir(owner), "batches", id)
}

func (s *Store) activeKey(id string) string { return path.Join(s.prefix, "active", id) }

func lockName(batchID string) string { return "modelgate_batch_" + batchID }

// ErrNotFound is returned for a file or batch that does not exist or
// belongs to another owner.
var ErrNotFound = errors.New("not found")

// isNotExist reports whether err says a key does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// list returns the last path element of each key under prefix, sorted; a
// missing prefix is an empty list.
func (s *Store) list(ctx context.Context, prefix string) ([]string, error) {
	return listIn(ctx, s.storage, prefix)
}

func listIn(ctx context.Context, st FileStorage, prefix string) ([]string, error) {
	keys, err := st.List(ctx, prefix, false)
	if err != nil && !isNotExist(err) {
		return nil, err
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, path.Base(k))
	}
	sort.Strings(names)
	return names, nil
}

// sortable is the alphabet of IDs: base32 in ASCII order, so IDs sort by
// creation time.
const sortable = "0123456789abcdefghijklmnopqrstuv"

// newID returns prefix followed by 24 characters: 48 bits of milliseconds
// since the epoch, then 72 random bits. IDs sort by creation time.
func newID(prefix string, now time.Time) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(raw[6:15])
	// 120 bits -> 24 characters of 5 bits.
	hi := binary.BigEndian.Uint64(raw[:8])
	lo := binary.BigEndian.Uint64(raw[8:])
	var out [24]byte
	for i := 23; i >= 0; i-- {
		out[i] = sortable[lo>>8&31] // the low 8 bits of raw[8:] are unused
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + string(out[:])
}

// validID reports whether id looks like one newID made with prefix, so
// that an ID from a URL never becomes a path outside its folder.
func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != 24 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(sortable, rest[i]) < 0 {
			return false
		}
	}
	return true
}
