package filelock

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// fast is a Dir with short timings, so staleness shows within a test.
func fast(path string) *Dir {
	return &Dir{Path: path, Refresh: 40 * time.Millisecond, Stale: 300 * time.Millisecond, Poll: 10 * time.Millisecond}
}

// lockWithin locks name in d, failing the test if that takes over wait.
func lockWithin(t *testing.T, d *Dir, name string, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Lock(ctx, name); err != nil {
		t.Fatalf("Lock(%s): %v", name, err)
	}
}

// refused checks that d cannot lock name within wait.
func refused(t *testing.T, d *Dir, name string, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Lock(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock(%s) of a held lock: %v, want the context's deadline", name, err)
	}
}

// deadHolder writes the lock file of a holder that died at time at, as
// FileStorage writes it.
func deadHolder(t *testing.T, filename string, at time.Time) {
	t.Helper()
	data, err := json.Marshal(map[string]time.Time{"created": at, "updated": at})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(filename), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filename, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Two Dirs on one folder stand for two processes.
func TestExcludesAndHandsOver(t *testing.T) {
	path := t.TempDir()
	a, b := fast(path), fast(path)
	lockWithin(t, a, "x", time.Second)
	lockWithin(t, b, "y", time.Second) // another name is free
	refused(t, b, "x", 100*time.Millisecond)
	refused(t, a, "x", 100*time.Millisecond) // the holder's own process waits too

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got <- b.Lock(ctx, "x")
	}()
	time.Sleep(50 * time.Millisecond)
	if err := a.Unlock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting for a released lock: %v", err)
	}
	for _, name := range []string{"x", "y"} {
		if err := b.Unlock(context.Background(), name); err != nil {
			t.Errorf("Unlock(%s): %v", name, err)
		}
	}
	if err := b.Unlock(context.Background(), "x"); err == nil {
		t.Error("Unlock of a lock not held succeeded")
	}
	left, _ := os.ReadDir(path)
	if len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
}

// A held lock outlives Stale: its refresher keeps it fresh.
func TestHeldLockStaysFresh(t *testing.T) {
	path := t.TempDir()
	a, b := fast(path), fast(path)
	lockWithin(t, a, "x", time.Second)
	refused(t, b, "x", 3*a.Stale)
	if err := a.Unlock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

// The stall FileStorage's locks have: a process releases a lock, another
// takes it and dies holding it. The first process must get the lock once
// it is stale; with FileStorage its leftover refresher keeps the dead
// lock fresh and it never does.
func TestDeadHolderAfterOwnRelease(t *testing.T) {
	path := t.TempDir()
	a := fast(path)
	lockWithin(t, a, "x", time.Second)
	if err := a.Unlock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	deadHolder(t, a.file("x"), time.Now())
	// Several refresh intervals pass before the lock is stale; a leftover
	// refresher would have renewed it by then.
	lockWithin(t, a, "x", 10*a.Stale)
	if err := a.Unlock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

// What lock file a dead or live holder leaves, and whether it is taken
// over at once.
func TestStaleFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, filename string)
		stale bool
	}{
		{"fresh", func(t *testing.T, f string) { deadHolder(t, f, time.Now()) }, false},
		{"old", func(t *testing.T, f string) { deadHolder(t, f, time.Now().Add(-time.Minute)) }, true},
		{"empty and new", func(t *testing.T, f string) { write(t, f, "", time.Now()) }, false},
		{"empty and old", func(t *testing.T, f string) { write(t, f, "", time.Now().Add(-time.Minute)) }, true},
		{"half written and old", func(t *testing.T, f string) { write(t, f, `{"created":"20`, time.Now().Add(-time.Minute)) }, true},
		{"created only, old", func(t *testing.T, f string) {
			write(t, f, `{"created":"`+time.Now().Add(-time.Minute).Format(time.RFC3339Nano)+`"}`, time.Now())
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fast(t.TempDir())
			tc.write(t, d.file("x"))
			ctx, cancel := context.WithTimeout(context.Background(), d.Stale/3)
			defer cancel()
			err := d.Lock(ctx, "x")
			if tc.stale && err != nil {
				t.Fatalf("a stale lock was not taken over: %v", err)
			}
			if !tc.stale && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a fresh lock: %v, want the context's deadline", err)
			}
		})
	}
}

// TestTempFilesOfDeadProcesses checks that the temporary files a process
// killed mid-write leaves are removed: every old one in the folder at a
// Dir's first Lock, and an old one of a lock taken over as stale when it
// is; a new one (a live writer's) and other files stay.
func TestTempFilesOfDeadProcesses(t *testing.T) {
	old := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name       string
		sweptFirst bool // the Dir locked once before the files were left
		deadX      bool // "x" is held by a dead process
		gone, kept []string
	}{
		{"at the first lock", false, false,
			[]string{"y.lock.tmp-dead", "x.lock.tmp-dead"}, []string{"y.lock.tmp-live", "y.lock"}},
		{"at a takeover", true, true,
			[]string{"x.lock.tmp-dead"}, []string{"y.lock.tmp-dead", "y.lock.tmp-live", "y.lock"}},
		{"neither", true, false,
			nil, []string{"x.lock.tmp-dead", "y.lock.tmp-dead", "y.lock.tmp-live", "y.lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir()
			d := fast(path)
			if tc.sweptFirst {
				lockWithin(t, d, "z", time.Second)
				if err := d.Unlock(context.Background(), "z"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.deadX {
				deadHolder(t, d.file("x"), old)
			}
			for _, f := range []string{"y.lock", "y.lock.tmp-dead", "x.lock.tmp-dead"} {
				write(t, filepath.Join(path, f), "{}", old)
			}
			write(t, filepath.Join(path, "y.lock.tmp-live"), "{}", time.Now())
			lockWithin(t, d, "x", time.Second)
			defer func() { _ = d.Unlock(context.Background(), "x") }()
			for _, f := range tc.gone {
				if _, err := os.Stat(filepath.Join(path, f)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is still there (%v)", f, err)
				}
			}
			for _, f := range tc.kept {
				if _, err := os.Stat(filepath.Join(path, f)); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
		})
	}
}

func write(t *testing.T, filename, data string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filename), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filename, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filename, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// A holder that stalled past Stale loses the lock: its release then fails
// and leaves the new holder's file alone, and its refresher stops.
func TestTakenOverLockStaysWithTheNewHolder(t *testing.T) {
	path := t.TempDir()
	stalled := fast(path)
	stalled.Refresh = time.Hour // it never refreshes
	b := fast(path)
	lockWithin(t, stalled, "x", time.Second)
	lockWithin(t, b, "x", 10*b.Stale)
	if err := stalled.Unlock(context.Background(), "x"); err == nil {
		t.Error("the stalled holder's Unlock succeeded")
	}
	refused(t, stalled, "x", 100*time.Millisecond)
	if err := b.Unlock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

// Processes of the other kind: FileStorage and Dir exclude each other on
// one folder.
func TestWithFileStorage(t *testing.T) {
	ctx := context.Background()
	fsys := &certmagic.FileStorage{Path: t.TempDir()}
	d := &Dir{Path: filepath.Join(fsys.Path, "locks"), File: func(name string) string {
		return certmagic.StorageKeys.Safe(name) + ".lock"
	}, Poll: 10 * time.Millisecond}
	const name = "modelgate_batch_x"

	if err := fsys.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	refused(t, d, name, 100*time.Millisecond)
	if err := fsys.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	lockWithin(t, d, name, time.Second)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := fsys.Lock(short, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FileStorage.Lock of a lock Dir holds: %v, want the context's deadline", err)
	}
	if err := d.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Lock(ctx, name); err != nil {
		t.Fatalf("FileStorage.Lock after Dir released: %v", err)
	}
	if err := fsys.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines of three processes: at most one is ever inside.
func TestMutualExclusion(t *testing.T) {
	path := t.TempDir()
	dirs := []*Dir{fast(path), fast(path), fast(path)}
	var inside, entered atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			d := dirs[i%len(dirs)]
			for range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := d.Lock(ctx, "x")
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				entered.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := d.Unlock(context.Background(), "x"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if entered.Load() != 120 {
		t.Errorf("entered %d times, want 120", entered.Load())
	}
}

// TestFileStorageRefresherAfterItsRelease: an instance locking through
// FileStorage (an older version, during a rolling upgrade) releases a lock
// that a Dir takes within FileStorage's 5 s; FileStorage's leftover
// refresher then rewrites the Dir's file without its token. The Dir still
// knows the file as its own (by its creation time): it keeps it fresh, and
// its Unlock removes it, so the next holder need not wait for staleness.
// (About 8 s: FileStorage's interval is a constant.)
func TestFileStorageRefresherAfterItsRelease(t *testing.T) {
	ctx := context.Background()
	fsys := &certmagic.FileStorage{Path: t.TempDir()}
	file := func(name string) string { return certmagic.StorageKeys.Safe(name) + ".lock" }
	d := &Dir{Path: filepath.Join(fsys.Path, "locks"), File: file, Refresh: 500 * time.Millisecond, Poll: 10 * time.Millisecond}
	const name = "modelgate_batch_x"
	if err := fsys.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // FileStorage's refresher still runs
	lockWithin(t, d, name, time.Second)
	time.Sleep(4 * time.Second) // its next tick rewrites the file
	// Our refresher puts the token back at its next tick (Refresh); a
	// loaded host may run either refresher late, so it has two seconds.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m, _, err := readMeta(d.file(name))
		if err != nil {
			t.Fatal(err)
		}
		if m.Token != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the token is not back in the file after our refresh")
		}
	}
	if err := d.Unlock(ctx, name); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if _, err := os.Stat(d.file(name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lock file after Unlock: %v", err)
	}
	other := &Dir{Path: d.Path, File: file, Poll: 10 * time.Millisecond}
	lockWithin(t, other, name, time.Second)
	_ = other.Unlock(ctx, name)
}

// TestOwnLockIsNotStaleToItsProcess: a lock whose refreshing stalled is
// stale to other processes, which take it over, but never to the goroutines
// of the process holding it, which wait for its Unlock; that Unlock then
// reports the takeover and leaves the new holder's file.
func TestOwnLockIsNotStaleToItsProcess(t *testing.T) {
	path := t.TempDir()
	d := fast(path)
	d.Refresh = time.Hour // the holder's refresher stalls
	lockWithin(t, d, "x", time.Second)
	refused(t, d, "x", 3*d.Stale)
	other := fast(path)
	lockWithin(t, other, "x", 3*d.Stale)
	if err := d.Unlock(context.Background(), "x"); err == nil {
		t.Error("Unlock of a lock taken over reported no error")
	}
	if _, err := os.Stat(d.file("x")); err != nil {
		t.Fatalf("the new holder's lock file: %v", err)
	}
	// The new holder keeps it fresh: a waiter that would take it over once
	// it went unrefreshed for 3 s (ten of fast's Stale: a loaded host may
	// hold a refresher back longer than 300 ms) never finds it stale.
	patient := &Dir{Path: path, Stale: 3 * time.Second, Poll: 10 * time.Millisecond}
	refused(t, patient, "x", 3*d.Stale)
	if err := other.Unlock(context.Background(), "x"); err != nil {
		t.Errorf("the new holder's Unlock: %v", err)
	}
}

// TestStaleTakeoverByManyWaiters: many processes find a dead holder's lock
// stale at once; one at a time takes it over, and no two ever hold it
// together (100 rounds of 6).
func TestStaleTakeoverByManyWaiters(t *testing.T) {
	path := t.TempDir()
	var overlaps, unlockErrs atomic.Int32
	for round := 0; round < 100 && overlaps.Load() == 0; round++ {
		deadHolder(t, filepath.Join(path, "x.lock"), time.Now().Add(-time.Minute))
		var inside atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 6 {
			d := fast(path)
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := d.Lock(ctx, "x"); err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				if err := d.Unlock(context.Background(), "x"); err != nil {
					unlockErrs.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times two holders at once", n)
	}
	if n := unlockErrs.Load(); n > 0 {
		t.Errorf("%d Unlocks found their lock taken over", n)
	}
	if left, _ := filepath.Glob(filepath.Join(path, "*")); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
}

// TestWithoutHardLinks: on a file system without hard links (link fails as
// it does there) locks are created in place, and still exclude, hand over
// and go stale.
func TestWithoutHardLinks(t *testing.T) {
	for _, linkErr := range []error{syscall.EPERM, errors.ErrUnsupported} {
		t.Run(linkErr.Error(), func(t *testing.T) {
			defer func(l func(string, string) error) { link = l }(link)
			link = func(oldname, newname string) error {
				return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: linkErr}
			}
			path := t.TempDir()
			a, b := fast(path), fast(path)
			lockWithin(t, a, "x", time.Second)
			if m, _, err := readMeta(a.file("x")); err != nil || m.Token == "" {
				t.Fatalf("the lock file: %+v, %v", m, err)
			}
			refused(t, b, "x", 3*a.Stale)
			if err := a.Unlock(context.Background(), "x"); err != nil {
				t.Fatal(err)
			}
			lockWithin(t, b, "x", time.Second)
			deadHolder(t, b.file("y"), time.Now().Add(-time.Minute))
			lockWithin(t, a, "y", time.Second)
			if err := b.Unlock(context.Background(), "x"); err != nil {
				t.Error(err)
			}
			if err := a.Unlock(context.Background(), "y"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestHolderReadsThroughAnEmptyFile: a FileStorage refreshes a lock file
// in place, truncating it before it writes, so the holder's refresher or
// Unlock may find it empty. The holder keeps the lock: its refresher
// writes its file again when it stays empty, and Unlock removes it.
func TestHolderReadsThroughAnEmptyFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refresh time.Duration
	}{
		{"refresher", 20 * time.Millisecond},
		{"unlock", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fast(t.TempDir())
			d.Refresh = tc.refresh
			lockWithin(t, d, "x", time.Second)
			if err := os.WriteFile(d.file("x"), nil, 0o644); err != nil { // truncated, as FileStorage does
				t.Fatal(err)
			}
			if tc.name == "refresher" {
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if m, _, err := readMeta(d.file("x")); err == nil && m.Token != "" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the holder's refresher left its lock file empty")
					}
				}
			}
			if err := d.Unlock(context.Background(), "x"); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if _, err := os.Stat(d.file("x")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the lock file after Unlock: %v", err)
			}
		})
	}
}
