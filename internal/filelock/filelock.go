// Package filelock takes locks across processes that share a file system,
// in the lock files of Caddy's file system storage (certmagic.FileStorage):
// the same file for a name, the same JSON timestamps, the same staleness
// rule, so a process that locks through FileStorage and one that locks
// through this package exclude each other.
//
// It exists because FileStorage's own locks can stall a cluster. Every
// FileStorage.Lock starts a goroutine that refreshes the lock file every 5 s
// until it finds the file gone, and it refreshes whatever file is at that
// path. After a process releases a lock and another takes it within those
// 5 s, the first process's goroutine refreshes the second's lock too. If the
// second process then dies holding the lock, the first keeps the dead
// lock fresh, and no one can take it. Its own next Lock waits forever. The
// batch engine locks a batch many times a second, so losing an instance of
// a cluster could stop the batch it shared (seen in CI: one instance
// waited over 40 s for a part of the batch that the killed instance
// had held).
//
// Here each held lock has a token written into its file. Its refresher
// stops when the lock is released and refreshes only a file that is still
// its own. Files are written whole (a temporary file, then a link or
// rename), so a reader never sees one half written. A stale lock is taken
// over by one waiter at a time (a guard file beside it), and only while its
// file is still the one judged stale.
package filelock

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults are FileStorage's: a lock not refreshed for Stale is free.
const (
	DefaultRefresh = 5 * time.Second
	DefaultStale   = 2 * DefaultRefresh
	DefaultPoll    = 250 * time.Millisecond
)

// Dir holds the lock files of one folder. Its zero timing fields take the
// defaults; every process sharing the folder must use the same Stale.
type Dir struct {
	// Path is the folder of the lock files (a FileStorage's Path + "/locks").
	Path string
	// File names the lock file of a lock name (FileStorage uses
	// StorageKeys.Safe(name) + ".lock"); nil uses name + ".lock".
	File func(name string) string
	// Refresh is how often a held lock's file gets a new timestamp.
	Refresh time.Duration
	// Stale is how old a lock file's timestamp may grow before others
	// take the lock over: its holder is presumed dead.
	Stale time.Duration
	// Poll is how often a waiting Lock looks again.
	Poll time.Duration

	mu   sync.Mutex
	held map[string]*holding
	// swept: the folder's temporary files left by dead processes were
	// removed (at the first Lock).
	swept sync.Once
	// noLinks: a link failed as it does where the file system has no
	// hard links; lock files are created in place from then on.
	noLinks atomic.Bool
}

// holding is a lock this process holds.
type holding struct {
	token   string
	created time.Time
	stop    chan struct{}
	done    chan struct{}
}

// owns reports whether m is the lock file of h: it carries h's token or,
// where a FileStorage's leftover refresher (see the package comment)
// rewrote it without the token, h's creation time, which that refresher
// keeps to the nanosecond.
func (h *holding) owns(m meta) bool {
	return m.Token == h.token || m.Token == "" && m.Created.Equal(h.created)
}

// meta is a lock file's contents: FileStorage's two timestamps, and the
// holder's token, which FileStorage ignores.
type meta struct {
	Created time.Time `json:"created,omitempty"`
	Updated time.Time `json:"updated,omitempty"`
	Token   string    `json:"modelgate_token,omitempty"`
}

func (d *Dir) file(name string) string {
	if d.File != nil {
		return filepath.Join(d.Path, d.File(name))
	}
	return filepath.Join(d.Path, name+".lock")
}

func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// Lock takes the lock name, waiting while another holder keeps it fresh,
// until ctx ends. A stale lock, whose holder stopped refreshing it, is
// taken over.
func (d *Dir) Lock(ctx context.Context, name string) error {
	filename := d.file(name)
	if err := os.MkdirAll(filepath.Dir(filename), 0o700); err != nil {
		return fmt.Errorf("creating the lock folder: %w", err)
	}
	d.swept.Do(func() { d.sweepTemps(filepath.Dir(filename), "") })
	poll := orDefault(d.Poll, DefaultPoll)
	for {
		h, err := d.create(filename)
		if err == nil {
			d.hold(name, filename, h)
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		broken, err := d.breakStale(name, filename)
		if err != nil {
			return err
		}
		if broken {
			continue
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Unlock releases the lock name, which this process must hold: its
// refresher stops and its file is removed, unless another process took the
// lock over as stale meanwhile (then the file is theirs and stays). Like
// FileStorage's, the lock belongs to the process, not to a goroutine: while
// one goroutine holds it, others of the process wait (it is never stale to
// them), and any of them may release it.
func (d *Dir) Unlock(_ context.Context, name string) error {
	d.mu.Lock()
	h := d.held[name]
	delete(d.held, name)
	d.mu.Unlock()
	if h == nil {
		return fmt.Errorf("lock %q is not held", name)
	}
	close(h.stop)
	<-h.done
	filename := d.file(name)
	m, settled, err := readSettled(filename)
	if err != nil {
		return err
	}
	// A file that never settled is this holder's, left empty or half
	// written by a FileStorage that stopped while it refreshed it: a new
	// holder's file is written at once (this package's whole, a
	// FileStorage's right after it creates it).
	if settled && !h.owns(m) {
		return fmt.Errorf("lock %q was taken over as stale before it was released", name)
	}
	return os.Remove(filename)
}

// create makes the lock file with a new token, failing with fs.ErrExist if
// the file is there: the file is written to a temporary name first and
// linked into place, which fails rather than replace. On a file system
// without hard links (some FUSE and SMB mounts) it is created in place, as
// FileStorage creates its own: a reader may then see it empty for a
// moment, which breakStale allows for.
func (d *Dir) create(filename string) (*holding, error) {
	h := &holding{token: newToken(), created: time.Now().Round(0)}
	m := meta{Created: h.created, Updated: h.created, Token: h.token}
	if d.noLinks.Load() {
		if err := createInPlace(filename, m); err != nil {
			return nil, err
		}
		return h, nil
	}
	tmp, err := writeTemp(filename, m)
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp) }() // linked or not, the temporary name goes; a leftover is only litter
	err = link(tmp, filename)
	switch {
	case err == nil:
		return h, nil
	case errors.Is(err, fs.ErrExist):
		return nil, fs.ErrExist
	case errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrPermission):
		d.noLinks.Store(true)
		if err := createInPlace(filename, m); err != nil {
			return nil, err
		}
		return h, nil
	}
	return nil, fmt.Errorf("creating lock file: %w", err)
}

// link is os.Link (a test stands in a file system without hard links).
var link = os.Link

// createInPlace creates the lock file itself, failing with fs.ErrExist if
// it is there, and writes m into it.
func createInPlace(filename string, m meta) error {
	f, err := os.OpenFile(filename, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		return fmt.Errorf("creating lock file: %w", err)
	}
	if err := writeClose(f, m); err != nil {
		_ = os.Remove(filename)
		return fmt.Errorf("creating lock file: %w", err)
	}
	return nil
}

// hold records a taken lock and starts its refresher.
func (d *Dir) hold(name, filename string, h *holding) {
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	d.mu.Lock()
	if d.held == nil {
		d.held = make(map[string]*holding)
	}
	d.held[name] = h
	d.mu.Unlock()
	go d.refresh(filename, h)
}

// refresh gives the held lock's file a new timestamp every Refresh until
// the lock is released, or until the file is gone or no longer the
// holder's (the lock was taken over as stale: this process stalled longer
// than Stale). A file that could not be read is tried again at the next
// tick, as one that could not be written. So is one that holds no lock
// (empty, or half written: a FileStorage refreshes in place); still so at
// the next tick, nobody is writing it, and it is written whole again.
func (d *Dir) refresh(filename string, h *holding) {
	defer close(h.done)
	t := time.NewTicker(orDefault(d.Refresh, DefaultRefresh))
	defer t.Stop()
	unsettled := false
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		m, settled, err := readSettled(filename)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			continue
		}
		if !settled {
			if !unsettled {
				unsettled = true
				continue
			}
			m = meta{Created: h.created}
		} else if !h.owns(m) {
			return
		}
		unsettled = false
		m.Token = h.token // back, where a FileStorage's refresher dropped it
		m.Updated = time.Now()
		tmp, err := writeTemp(filename, m)
		if err != nil {
			continue // try again at the next tick; the lock goes stale only after several
		}
		if err := os.Rename(tmp, filename); err != nil {
			_ = os.Remove(tmp)
		}
	}
}

// breakStale removes the lock file of name if its holder stopped
// refreshing it, and reports whether it did (or found the file gone or
// changed: either way, Lock tries again at once). A lock this process holds
// is never stale here: its other goroutines wait for its Unlock.
//
// Many waiters may find a lock stale at once. One at a time takes it over,
// under a guard file beside it, and removes the lock file only if it still
// holds the very bytes judged stale: a waiter that judged it before another
// took it over finds the new holder's file instead, and leaves it.
func (d *Dir) breakStale(name, filename string) (bool, error) {
	m, data, err := readMeta(filename)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // released meanwhile: try again at once
	}
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	h := d.held[name]
	d.mu.Unlock()
	if h != nil && h.owns(m) {
		return false, nil
	}
	ref := m.Updated
	if ref.IsZero() {
		ref = m.Created
	}
	if ref.IsZero() {
		// Empty or half written by a FileStorage (which truncates and
		// writes in place): its last change tells its age.
		fi, err := os.Stat(filename)
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		ref = fi.ModTime()
	}
	stale := orDefault(d.Stale, DefaultStale)
	if time.Since(ref) <= stale {
		return false, nil
	}
	release, ok, err := guard(filename+".takeover", stale)
	if err != nil || !ok {
		return false, err // another waiter is taking it over: look again later
	}
	defer release()
	now, err := os.ReadFile(filename)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("taking over a stale lock: %w", err)
	case !bytes.Equal(now, data):
		return true, nil // taken over, released or refreshed meanwhile: judge it again
	}
	if err := os.Remove(filename); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("taking over a stale lock: %w", err)
	}
	// The dead holder may have been killed while it wrote a new timestamp.
	d.sweepTemps(filepath.Dir(filename), filepath.Base(filename)+tempInfix)
	return true, nil
}

// tempInfix is in the name of a lock file's temporary files, between the
// lock file's name and a token.
const tempInfix = ".tmp-"

// sweepTemps removes the temporary files in folder (those of lock files
// whose names begin with prefix; "" for all) that are older than Stale:
// left by a process killed between writing one and linking or renaming it
// into place. A live writer holds one for the moment of a write and a sync;
// one that took longer than Stale finds it gone and fails that write (a
// refresh is tried again at the next tick, a Lock returns the error).
func (d *Dir) sweepTemps(folder, prefix string) {
	entries, err := os.ReadDir(folder)
	if err != nil {
		return
	}
	stale := orDefault(d.Stale, DefaultStale)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.Contains(name, tempInfix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > stale {
			_ = os.Remove(filepath.Join(folder, name))
		}
	}
}

// guard creates the guard file g, if no one else has it, and returns what
// removes it. A guard older than stale was left by a process that died
// taking a lock over (it holds one for microseconds): it is removed, and
// the next look takes its place. (Two waiters that both find it that old
// may both remove one, and two take-overs run at once; each still removes
// only the file it judged stale, unless that is replaced in the moment
// between its reading and its removing.)
func guard(g string, stale time.Duration) (release func(), ok bool, err error) {
	f, err := os.OpenFile(g, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		_ = f.Close()
		return func() { _ = os.Remove(g) }, true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, fmt.Errorf("taking over a stale lock: %w", err)
	}
	if fi, err := os.Stat(g); err == nil && time.Since(fi.ModTime()) > stale {
		_ = os.Remove(g)
	}
	return nil, false, nil
}

// readMeta reads a lock file. A file that does not parse (FileStorage's,
// caught between its truncate and its write) gives a zero meta, no error.
func readMeta(filename string) (meta, []byte, error) {
	data, err := os.ReadFile(filename)
	if err != nil {
		return meta{}, nil, err
	}
	var m meta
	if json.Unmarshal(data, &m) != nil {
		m = meta{}
	}
	return m, data, nil
}

// settleTries and settlePause bound how long readSettled waits for a
// file that holds no lock to be written.
const (
	settleTries = 5
	settlePause = 2 * time.Millisecond
)

// readSettled is readMeta that reads a file holding no lock again, a few
// milliseconds apart: a FileStorage refreshes a lock file in place,
// truncating it before it writes, and a reader between the two finds it
// empty or half written. Every lock file has its creation time; settled
// is false when the file never showed one.
func readSettled(filename string) (m meta, settled bool, err error) {
	for try := 1; ; try++ {
		m, _, err = readMeta(filename)
		if err != nil || !m.Created.IsZero() {
			return m, err == nil, err
		}
		if try == settleTries {
			return m, false, nil
		}
		time.Sleep(settlePause)
	}
}

// writeTemp writes m, synced, to a new file beside filename and returns
// its name. The sync is FileStorage's too: network file systems have been
// seen to leave unsynced lock files empty (caddyserver/caddy#3954).
func writeTemp(filename string, m meta) (string, error) {
	tmp := filename + tempInfix + newToken()
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("writing lock file: %w", err)
	}
	if err := writeClose(f, m); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("writing lock file: %w", err)
	}
	return tmp, nil
}

// writeClose writes m into f, syncs and closes it.
func writeClose(f *os.File, m meta) error {
	err := json.NewEncoder(f).Encode(m)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
