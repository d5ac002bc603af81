package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
)

// A storage test fake is a Storage.
var _ storage.Storage = (*storagetest.Memory)(nil)

func TestIsNotExist(t *testing.T) {
	ctx := context.Background()
	_, err := storagetest.NewMemory().Load(ctx, "missing")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{err, true},
		{fs.ErrNotExist, true},
		{fmt.Errorf("wrapped: %w", fs.ErrNotExist), true},
		{fs.ErrExist, false},
		{errors.New("not exist"), false},
		{nil, false},
	} {
		if got := storage.IsNotExist(tc.err); got != tc.want {
			t.Errorf("IsNotExist(%v) = %v", tc.err, got)
		}
	}
}

// The lock is released by the returned function, also once the context
// it was taken with has ended.
func TestLockReleasedAfterCancel(t *testing.T) {
	m := storagetest.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	unlock, err := storage.Lock(ctx, m, "l")
	if err != nil {
		t.Fatal(err)
	}
	if held := m.HeldLocks(); len(held) != 1 || held[0] != "l" {
		t.Fatalf("held locks %v, want [l]", held)
	}
	cancel()
	unlock()
	if held := m.HeldLocks(); len(held) != 0 {
		t.Fatalf("after unlock %v still held", held)
	}
}

// A lock that cannot be had in time is the context's error, and nothing
// to release.
func TestLockBusy(t *testing.T) {
	m := storagetest.NewMemory()
	ctx := context.Background()
	unlock, err := storage.Lock(ctx, m, "l")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if u, err := storage.Lock(short, m, "l"); !errors.Is(err, context.DeadlineExceeded) || u != nil {
		t.Errorf("Lock of a held lock = %v, %v; want the deadline and no unlock", u != nil, err)
	}
}
