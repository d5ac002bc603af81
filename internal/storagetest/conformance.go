package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// Conformance checks the certmagic.Storage contract, as the engines rely
// on it, on fresh storages from newStorage (one per subtest). Where the
// contract leaves room, it asks what Caddy's file system storage does, so
// a storage that passes behaves as that one: values, folders, listing,
// deleting, Stat, and locks that exclude and wait.
func Conformance(t *testing.T, newStorage func(t *testing.T) certmagic.Storage) {
	ctx := context.Background()
	// tree stores the same small tree in s.
	tree := func(t *testing.T, s certmagic.Storage) {
		t.Helper()
		for _, k := range []string{"a/b/c", "a/b/d", "a/e", "ab/f"} {
			if err := s.Store(ctx, k, []byte("value of "+k)); err != nil {
				t.Fatalf("Store(%s): %v", k, err)
			}
		}
	}
	list := func(t *testing.T, s certmagic.Storage, prefix string, recursive bool) []string {
		t.Helper()
		got, err := s.List(ctx, prefix, recursive)
		if err != nil {
			t.Fatalf("List(%s, %v): %v", prefix, recursive, err)
		}
		slices.Sort(got) // the contract promises no order
		return got
	}

	t.Run("StoreLoad", func(t *testing.T) {
		s := newStorage(t)
		buf := []byte("one")
		if err := s.Store(ctx, "x/y", buf); err != nil {
			t.Fatal(err)
		}
		buf[0] = 'X' // the storage keeps what was stored, not the buffer
		got, err := s.Load(ctx, "x/y")
		if err != nil || string(got) != "one" {
			t.Fatalf("Load = %q, %v; want one", got, err)
		}
		got[0] = 'Z' // nor does it hand out what it keeps
		if again, _ := s.Load(ctx, "x/y"); string(again) != "one" {
			t.Errorf("changing what Load returned changed the value: %q", again)
		}
		if err := s.Store(ctx, "x/y", []byte("two")); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Load(ctx, "x/y"); string(got) != "two" {
			t.Errorf("after overwrite Load = %q, want two", got)
		}
		if err := s.Store(ctx, "x/empty", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, "x/empty"); err != nil || len(got) != 0 {
			t.Errorf("Load of an empty value = %q, %v", got, err)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		s := newStorage(t)
		tree(t, s)
		if _, err := s.Load(ctx, "a/zz"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load of a missing key: %v, want fs.ErrNotExist", err)
		}
		if _, err := s.Load(ctx, "a/b"); err == nil {
			t.Error("Load of a folder succeeded")
		}
		if _, err := s.List(ctx, "zz", false); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("List of nothing: %v, want fs.ErrNotExist", err)
		}
		if _, err := s.Stat(ctx, "a/zz"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat of a missing key: %v, want fs.ErrNotExist", err)
		}
	})

	t.Run("Exists", func(t *testing.T) {
		s := newStorage(t)
		tree(t, s)
		// (Not asked: a key under a value, "a/b/c/d", which the file
		// system storage says exists, as its stat fails with ENOTDIR.)
		for k, want := range map[string]bool{"a/b/c": true, "a/b": true, "a": true, "a/x": false, "b": false, "ab": true} {
			if got := s.Exists(ctx, k); got != want {
				t.Errorf("Exists(%s) = %v, want %v", k, got, want)
			}
		}
	})

	t.Run("List", func(t *testing.T) {
		s := newStorage(t)
		tree(t, s)
		if got := list(t, s, "a", false); !slices.Equal(got, []string{"a/b", "a/e"}) {
			t.Errorf("List(a) = %v, want [a/b a/e]", got)
		}
		if got := list(t, s, "a", true); !slices.Equal(got, []string{"a/b", "a/b/c", "a/b/d", "a/e"}) {
			t.Errorf("List(a, recursive) = %v, want the folder a/b too", got)
		}
		if got := list(t, s, "a/b", false); !slices.Equal(got, []string{"a/b/c", "a/b/d"}) {
			t.Errorf("List(a/b) = %v", got)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := newStorage(t)
		tree(t, s)
		if err := s.Delete(ctx, "a/b"); err != nil {
			t.Fatal(err)
		}
		if s.Exists(ctx, "a/b") || s.Exists(ctx, "a/b/c") {
			t.Error("Delete of a folder left what was in it")
		}
		if !s.Exists(ctx, "a/e") || !s.Exists(ctx, "ab/f") {
			t.Error("Delete(a/b) deleted a key beside it, or one that only starts like it")
		}
		// Deleting a value, then again, then a key that never was: no
		// error for a key that does not exist.
		for _, k := range []string{"a/e", "a/e", "never/was"} {
			if err := s.Delete(ctx, k); err != nil {
				t.Errorf("Delete(%s): %v, want none", k, err)
			}
			if _, err := s.Load(ctx, k); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Load after Delete(%s): %v", k, err)
			}
		}
	})

	t.Run("Stat", func(t *testing.T) {
		s := newStorage(t)
		before := time.Now().Add(-time.Minute)
		tree(t, s)
		info, err := s.Stat(ctx, "a/b/c")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "a/b/c" || info.Size != int64(len("value of a/b/c")) || !info.IsTerminal ||
			info.Modified.Before(before) || info.Modified.After(time.Now().Add(time.Minute)) {
			t.Errorf("Stat(a/b/c) = %+v", info)
		}
		if info, err := s.Stat(ctx, "a/b"); err != nil || info.IsTerminal {
			t.Errorf("Stat of a folder = %+v, %v; want not terminal", info, err)
		}
	})

	t.Run("ValueAndFolder", func(t *testing.T) {
		s := newStorage(t)
		tree(t, s)
		if err := s.Store(ctx, "a/b", []byte("x")); err == nil {
			t.Error("a value was stored over a folder")
		}
		if err := s.Store(ctx, "a/e/x", []byte("x")); err == nil {
			t.Error("a value was stored under a value")
		}
		if got, _ := s.Load(ctx, "a/e"); !bytes.Equal(got, []byte("value of a/e")) {
			t.Errorf("a refused Store changed a/e to %q", got)
		}
	})

	t.Run("Lock", func(t *testing.T) {
		s := newStorage(t)
		if err := s.Lock(ctx, "l"); err != nil {
			t.Fatal(err)
		}
		if err := s.Lock(ctx, "other"); err != nil {
			t.Fatalf("a held lock blocked another name: %v", err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := s.Lock(short, "l"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held lock: %v, want the context's deadline", err)
		}
		var released atomic.Bool
		got := make(chan error)
		go func() {
			// Long enough for a storage that polls its locks.
			wait, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := s.Lock(wait, "l")
			if err == nil && !released.Load() {
				err = errors.New("Lock returned before the holder released the lock")
			}
			got <- err
		}()
		time.Sleep(20 * time.Millisecond)
		released.Store(true)
		if err := s.Unlock(ctx, "l"); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("Lock waiting for the released lock: %v", err)
		}
		for _, name := range []string{"l", "other"} {
			if err := s.Unlock(ctx, name); err != nil {
				t.Errorf("Unlock(%s): %v", name, err)
			}
		}
		if err := s.Unlock(ctx, "l"); err == nil {
			t.Error("Unlock of a lock nobody holds succeeded")
		}
	})
}
