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
// stops when the lock is released and refreshes only a file that still
// carries its token. Files are written whole (a temporary file, then a
// link or rename), so a reader never sees one half written.
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
	"sync"
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
}

// holding is a lock this process holds.
type holding struct {
	token string
	stop  chan struct{}
	done  chan struct{}
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
	poll := orDefault(d.Poll, DefaultPoll)
	for {
		token, err := d.create(filename)
		if err == nil {
			d.hold(name, filename, token)
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		broken, err := d.breakStale(filename)
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
// lock over as stale meanwhile (then the file is theirs and stays).
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
	m, _, err := readMeta(filename)
	if err != nil {
		return err
	}
	if m.Token != h.token {
		return fmt.Errorf("lock %q was taken over as stale before it was released", name)
	}
	return os.Remove(filename)
}

// create makes the lock file with a new token, failing with fs.ErrExist if
// the file is there: the file is written to a temporary name first and
// linked into place, which fails rather than replace.
func (d *Dir) create(filename string) (string, error) {
	token := newToken()
	now := time.Now()
	tmp, err := writeTemp(filename, meta{Created: now, Updated: now, Token: token})
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filename); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fs.ErrExist
		}
		return "", fmt.Errorf("creating lock file: %w", err)
	}
	return token, nil
}

// hold records a taken lock and starts its refresher.
func (d *Dir) hold(name, filename, token string) {
	h := &holding{token: token, stop: make(chan struct{}), done: make(chan struct{})}
	d.mu.Lock()
	if d.held == nil {
		d.held = make(map[string]*holding)
	}
	d.held[name] = h
	d.mu.Unlock()
	go d.refresh(filename, h)
}

// refresh gives the held lock's file a new timestamp every Refresh until
// the lock is released, or until the file no longer carries the holder's
// token (the lock was taken over as stale: this process stalled longer
// than Stale).
func (d *Dir) refresh(filename string, h *holding) {
	defer close(h.done)
	t := time.NewTicker(orDefault(d.Refresh, DefaultRefresh))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		m, _, err := readMeta(filename)
		if err != nil || m.Token != h.token {
			return
		}
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

// breakStale removes the lock file if its holder stopped refreshing it,
// and reports whether it did. Two waiters may find it stale at once: the
// file is renamed away first, and only the waiter whose rename moved the
// very file it judged stale removes it; one that moved a new holder's
// file links it back.
func (d *Dir) breakStale(filename string) (bool, error) {
	m, data, err := readMeta(filename)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // released meanwhile: try again at once
	}
	if err != nil {
		return false, err
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
	if time.Since(ref) <= orDefault(d.Stale, DefaultStale) {
		return false, nil
	}
	aside := filename + ".stale-" + newToken()
	if err := os.Rename(filename, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		return false, fmt.Errorf("taking over a stale lock: %w", err)
	}
	moved, err := os.ReadFile(aside)
	if err == nil && !bytes.Equal(moved, data) {
		// Not the file judged stale: put it back unless a newer one is
		// already in place.
		_ = os.Link(aside, filename)
	}
	_ = os.Remove(aside)
	return true, nil
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

// writeTemp writes m, synced, to a new file beside filename and returns
// its name. The sync is FileStorage's too: network file systems have been
// seen to leave unsynced lock files empty (caddyserver/caddy#3954).
func writeTemp(filename string, m meta) (string, error) {
	tmp := filename + ".tmp-" + newToken()
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("writing lock file: %w", err)
	}
	err = json.NewEncoder(f).Encode(m)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("writing lock file: %w", err)
	}
	return tmp, nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
