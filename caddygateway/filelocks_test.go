package caddygateway

import (
	"path/filepath"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/modelgate/modelgate/internal/storagetest"
)

// The app's file system storage takes its locks through filelock, and is
// still a storage as the engines expect one.
func TestFileStorageLocks(t *testing.T) {
	storagetest.Conformance(t, func(t *testing.T) certmagic.Storage {
		return withFileLocks(&certmagic.FileStorage{Path: t.TempDir()})
	})

	root := t.TempDir()
	s, ok := withFileLocks(&certmagic.FileStorage{Path: root}).(fileLocks)
	if !ok {
		t.Fatal("the file system storage was not wrapped")
	}
	if s.locks.Path != filepath.Join(root, "locks") || s.String() != "FileStorage:"+root {
		t.Errorf("lock folder %s, name %s; want %s", s.locks.Path, s, filepath.Join(root, "locks"))
	}
	if again := withFileLocks(&certmagic.FileStorage{Path: root}).(fileLocks); again.locks != s.locks {
		t.Error("two storages on one folder got two lock tables")
	}
	mem := storagetest.NewMemory()
	if withFileLocks(mem) != certmagic.Storage(mem) {
		t.Error("a storage other than the file system's was wrapped")
	}
}
