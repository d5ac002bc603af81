package batch

import (
	"context"
	"time"
)

// FileStorage is where a Store keeps bulk bytes: the contents of files
// (uploads and batch output), the validated request lines of each batch's
// work parts, and their result checkpoints. Every Storage is one.
//
// By default bulk bytes live in the Store's Storage with everything else.
// WithFileStorage puts them elsewhere, under the same keys, while the
// records (file metadata, batch objects, claims, cancel marks, the list of
// active batches) and the locks stay in the Storage: a cluster can
// coordinate through Redis and keep a 200 MiB upload on a shared file
// system or an object store. Every instance must then see the same
// FileStorage too.
type FileStorage interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
}

// Option configures a Store.
type Option func(*Store)

// WithFileStorage keeps the Store's bulk bytes in fs (see FileStorage).
func WithFileStorage(fs FileStorage) Option {
	return func(s *Store) {
		if fs != nil {
			s.files, s.separateFiles = fs, true
		}
	}
}

// Retention is how long a Store keeps files that do not say themselves
// when they expire (files stored before expiry was recorded): uploads
// (purpose batch) Files after their creation, batch results (purpose
// batch_output) Output after theirs. Zero keeps them for ever. Files
// uploaded now record when they expire (PendingFile.ExpireAfter,
// Settings.OutputRetention), and expire then whatever the Retention.
type Retention struct {
	Files  time.Duration
	Output time.Duration
}

// WithRetention sets how long the Store keeps files (see Retention), and
// how long a file uploaded to it is kept unless it asks for less.
func WithRetention(r Retention) Option {
	return func(s *Store) { s.retention = r }
}

// deleteDir deletes dir, which may hold records and bulk bytes, in both
// storages.
func (s *Store) deleteDir(ctx context.Context, dir string) error {
	err := s.storage.Delete(ctx, dir)
	if s.separateFiles {
		if ferr := s.files.Delete(ctx, dir); err == nil {
			err = ferr
		}
	}
	return err
}
