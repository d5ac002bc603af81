package caddygateway

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/caddyserver/certmagic"

	"github.com/modelgate/modelgate/internal/filelock"
)

// fileLockDirs holds one filelock.Dir per lock folder, for the life of the
// process: configs that share a file system storage share its held locks.
var fileLockDirs sync.Map // lock folder -> *filelock.Dir

// withFileLocks returns s with its locks taken by filelock when s is
// Caddy's file system storage, whose own locks can stall a cluster after
// an instance dies (see the filelock package). The lock files stay
// FileStorage's, so Caddy's certificate management and instances of older
// versions still exclude and are excluded. Any other storage is returned
// as it is.
func withFileLocks(s certmagic.Storage) certmagic.Storage {
	fs, ok := s.(*certmagic.FileStorage)
	if !ok {
		return s
	}
	path := filepath.Join(fs.Path, "locks")
	d, _ := fileLockDirs.LoadOrStore(path, &filelock.Dir{Path: path, File: func(name string) string {
		return certmagic.StorageKeys.Safe(name) + ".lock"
	}})
	return fileLocks{Storage: fs, locks: d.(*filelock.Dir)}
}

// fileLocks is a file system storage whose locks filelock takes.
type fileLocks struct {
	certmagic.Storage
	locks *filelock.Dir
}

func (s fileLocks) Lock(ctx context.Context, name string) error { return s.locks.Lock(ctx, name) }

func (s fileLocks) Unlock(ctx context.Context, name string) error { return s.locks.Unlock(ctx, name) }

func (s fileLocks) String() string { return s.Storage.(*certmagic.FileStorage).String() }
