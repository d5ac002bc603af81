// Package storagetest holds what tests of code on a certmagic.Storage
// need: Memory, an in-memory storage that keeps the contract as Caddy's
// file system storage does (locks included), with hooks to watch and break
// it; and Conformance, the checks any storage must pass, which hold Memory
// to that contract.
//
// It is internal: the batch and keys engines share it in their tests.
package storagetest

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// Memory is an in-memory certmagic.Storage: a map guarded by a mutex, with
// locks that block across goroutines as a real storage's block across
// processes. Keys are "/"-separated paths, cleaned as a file system cleans
// them ("a//b/" is "a/b"); a folder exists while some key is under it, and
// a key cannot be both a value and a folder. Stored values are copies:
// neither the caller's buffer nor what Load returns aliases them.
//
// Use NewMemory; the zero value is not ready. Several users (the
// "processes" of a test) may share one Memory.
type Memory struct {
	mu    sync.Mutex
	data  map[string]value
	locks map[string]chan struct{} // held while present; closed on unlock

	failWith error
	onStore  func(key string, value []byte) error
	stores   int
}

type value struct {
	b        []byte
	modified time.Time
}

var _ certmagic.Storage = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{data: make(map[string]value), locks: make(map[string]chan struct{})}
}

// clean is the canonical form of a key: no empty elements, no slash at
// either end; "" is the root.
func clean(key string) string {
	return strings.Trim(path.Clean("/"+key), "/")
}

// under reports whether k is below the folder dir ("" is the root).
func under(k, dir string) (rest string, ok bool) {
	if dir == "" {
		return k, true
	}
	return strings.CutPrefix(k, dir+"/")
}

// isFolder reports whether some key is below key. m.mu is held.
func (m *Memory) isFolder(key string) bool {
	for k := range m.data {
		if _, ok := under(k, key); ok {
			return true
		}
	}
	return false
}

// Fail makes every operation but Lock and Unlock fail with err from now
// on (Exists reports false, as the contract asks when checking fails), as
// a storage that went down; Fail(nil) brings it back.
func (m *Memory) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failWith = err
}

// OnStore installs a hook that sees every Store before it happens; an
// error it returns fails the Store, which then stores nothing. The hook
// runs without Memory's lock held, so it may use the storage. nil removes
// it.
func (m *Memory) OnStore(f func(key string, value []byte) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onStore = f
}

// Store puts a copy of value at key.
func (m *Memory) Store(_ context.Context, key string, v []byte) error {
	key = clean(key)
	m.mu.Lock()
	hook, failWith := m.onStore, m.failWith
	m.mu.Unlock()
	if failWith != nil {
		return failWith
	}
	if hook != nil {
		if err := hook(key, v); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return m.failWith
	}
	if key == "" {
		return fmt.Errorf("storing at the root: %w", fs.ErrInvalid)
	}
	if m.isFolder(key) {
		return fmt.Errorf("storing %s: it is a folder: %w", key, fs.ErrExist)
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if _, ok := m.data[dir]; ok {
			return fmt.Errorf("storing %s: %s is not a folder: %w", key, dir, fs.ErrExist)
		}
	}
	m.stores++
	m.data[key] = value{b: append([]byte{}, v...), modified: time.Now()}
	return nil
}

// Load returns a copy of the value at key; an error wrapping
// fs.ErrNotExist if there is none (a folder has no value).
func (m *Memory) Load(_ context.Context, key string) ([]byte, error) {
	key = clean(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return nil, m.failWith
	}
	v, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("loading %s: %w", key, fs.ErrNotExist)
	}
	return append([]byte{}, v.b...), nil
}

// Delete deletes key and, if it is a folder, everything under it. A key
// that does not exist is no error, as the contract says.
func (m *Memory) Delete(_ context.Context, key string) error {
	key = clean(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return m.failWith
	}
	for k := range m.data {
		if _, ok := under(k, key); ok || k == key {
			delete(m.data, k)
		}
	}
	return nil
}

// Exists reports whether key is a value or a folder.
func (m *Memory) Exists(_ context.Context, key string) bool {
	key = clean(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return false
	}
	if _, ok := m.data[key]; ok {
		return true
	}
	return m.isFolder(key)
}

// List returns the keys in the folder prefix, sorted: the values and
// folders right in it, or, if recursive, every value and folder below it.
// A prefix with nothing under it is an error wrapping fs.ErrNotExist, as
// on a file system.
func (m *Memory) List(_ context.Context, prefix string, recursive bool) ([]string, error) {
	prefix = clean(prefix)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return nil, m.failWith
	}
	seen := make(map[string]bool)
	for k := range m.data {
		rest, ok := under(k, prefix)
		if !ok {
			continue
		}
		// The folders on the way count too, as on a file system; without
		// recursive only the first.
		for i := strings.IndexByte(rest, '/'); i >= 0; {
			seen[path.Join(prefix, rest[:i])] = true
			if !recursive {
				break
			}
			j := strings.IndexByte(rest[i+1:], '/')
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if recursive || !strings.Contains(rest, "/") {
			seen[k] = true
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("listing %s: %w", prefix, fs.ErrNotExist)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Stat describes key: a value (IsTerminal, its size and when it was
// stored) or a folder; an error wrapping fs.ErrNotExist if it is neither.
func (m *Memory) Stat(_ context.Context, key string) (certmagic.KeyInfo, error) {
	key = clean(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return certmagic.KeyInfo{}, m.failWith
	}
	if v, ok := m.data[key]; ok {
		return certmagic.KeyInfo{Key: key, Modified: v.modified, Size: int64(len(v.b)), IsTerminal: true}, nil
	}
	if m.isFolder(key) {
		return certmagic.KeyInfo{Key: key}, nil
	}
	return certmagic.KeyInfo{}, fmt.Errorf("stat %s: %w", key, fs.ErrNotExist)
}

// Lock takes the lock name, blocking until it is free or ctx ends (then it
// returns ctx's error); a free lock is taken even with ctx ended, as the
// file system storage takes it. Locks never go stale: a test that leaves one held
// blocks the next Lock of it.
func (m *Memory) Lock(ctx context.Context, name string) error {
	for {
		m.mu.Lock()
		held, busy := m.locks[name]
		if !busy {
			m.locks[name] = make(chan struct{})
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Unlock releases the lock name; an error if it is not held.
func (m *Memory) Unlock(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, ok := m.locks[name]
	if !ok {
		return fmt.Errorf("unlocking %s: not locked", name)
	}
	delete(m.locks, name)
	close(held)
	return nil
}

// Keys returns the stored keys that start with prefix (as a string, not
// only as a folder: "a/b" matches "a/bc"), sorted.
func (m *Memory) Keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Snapshot returns a copy of everything stored.
func (m *Memory) Snapshot() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.data))
	for k, v := range m.data {
		out[k] = append([]byte{}, v.b...)
	}
	return out
}

// HeldLocks returns the names of the locks held now, sorted.
func (m *Memory) HeldLocks() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.locks))
	for k := range m.locks {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Stores is how many Stores succeeded.
func (m *Memory) Stores() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stores
}
