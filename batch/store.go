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
	"errors"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
)

// Storage is the subset of certmagic.Storage the engine uses. Load returns an
// error wrapping fs.ErrNotExist for a missing key. Lock blocks until the
// lock is held or ctx ends; a lock is held across processes that share the
// storage.
type Storage = storage.Storage

// Store keeps files and batches in a Storage.
type Store struct {
	storage Storage
	files   FileStorage // bulk bytes; storage unless WithFileStorage
	prefix  string

	separateFiles bool // files is not storage

	retention Retention

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
func (s *Store) ownerDir(owner string) string { return storage.OwnerDir(s.prefix, owner) }

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

// list returns the last path element of each key under prefix, sorted; a
// missing prefix is an empty list.
func (s *Store) list(ctx context.Context, prefix string) ([]string, error) {
	return listIn(ctx, s.storage, prefix)
}

func listIn(ctx context.Context, st FileStorage, prefix string) ([]string, error) {
	keys, err := st.List(ctx, prefix, false)
	if err != nil && !storage.IsNotExist(err) {
		return nil, err
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, path.Base(k))
	}
	sort.Strings(names)
	return names, nil
}
