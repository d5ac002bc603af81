package batch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// memStorage is an in-memory Storage: a map guarded by a mutex, with real
// cross-goroutine locks. Keys are "/"-separated paths; a "directory" exists
// while some key is under it.
type memStorage struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks map[string]chan struct{} // held while present; closed on unlock

	// onStore, when set, sees every Store before it happens; an error it
	// returns fails the Store.
	onStore func(key string, value []byte) error
	stores  int
}

func newMemStorage() *memStorage {
	return &memStorage{data: make(map[string][]byte), locks: make(map[string]chan struct{})}
}

func (m *memStorage) Store(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	hook := m.onStore
	m.mu.Unlock()
	if hook != nil {
		if err := hook(key, value); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stores++
	// A copy, as a real storage keeps the bytes, not the caller's buffer.
	m.data[key] = append([]byte(nil), value...)
	return nil
}

func (m *memStorage) Load(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("loading %s: %w", key, fs.ErrNotExist)
	}
	return append([]byte(nil), v...), nil
}

func (m *memStorage) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	found := false
	for k := range m.data {
		if k == key || strings.HasPrefix(k, key+"/") {
			delete(m.data, k)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("deleting %s: %w", key, fs.ErrNotExist)
	}
	return nil
}

func (m *memStorage) Exists(_ context.Context, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.data[key]; ok {
		return true
	}
	for k := range m.data {
		if strings.HasPrefix(k, key+"/") {
			return true
		}
	}
	return false
}

func (m *memStorage) List(_ context.Context, prefix string, recursive bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix = strings.TrimSuffix(prefix, "/")
	seen := make(map[string]bool)
	for k := range m.data {
		rest, ok := strings.CutPrefix(k, prefix+"/")
		if !ok {
			continue
		}
		if !recursive {
			first, _, _ := strings.Cut(rest, "/")
			seen[prefix+"/"+first] = true
			continue
		}
		seen[k] = true
		// The folders on the way count too, as on a file system.
		for i := strings.IndexByte(rest, '/'); i >= 0; {
			seen[prefix+"/"+rest[:i]] = true
			j := strings.IndexByte(rest[i+1:], '/')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("listing %s: %w", prefix, fs.ErrNotExist)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

func (m *memStorage) Lock(ctx context.Context, name string) error {
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

func (m *memStorage) Unlock(_ context.Context, name string) error {
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

// setOnStore installs the Store hook.
func (m *memStorage) setOnStore(f func(key string, value []byte) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onStore = f
}

// keys returns the stored keys under prefix, sorted.
func (m *memStorage) keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// storeCount is how many Stores succeeded.
func (m *memStorage) storeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stores
}

// errCrashed is what a crashed view's writes fail with.
var errCrashed = errors.New("the process is dead")

// crashView is the storage as one process sees it: after crash, none of its
// writes or locks reach the storage any more, as if it had been killed; an
// Unlock still passes, so a lock it held is not left held forever (a real
// storage's lock would go stale and be taken over).
type crashView struct {
	*memStorage
	mu      sync.RWMutex // held by writes, so a crash is atomic to them
	crashed atomic.Bool
	// crashOn, when set, crashes the process as it is about to store key.
	crashOn func(key string) bool
}

func (c *crashView) crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed.Store(true)
}

func (c *crashView) Store(ctx context.Context, key string, value []byte) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.crashed.Load() {
		return errCrashed
	}
	if c.crashOn != nil && c.crashOn(key) {
		c.crashed.Store(true)
		return errCrashed
	}
	return c.memStorage.Store(ctx, key, value)
}

func (c *crashView) Delete(ctx context.Context, key string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.crashed.Load() {
		return errCrashed
	}
	return c.memStorage.Delete(ctx, key)
}

func (c *crashView) Lock(ctx context.Context, name string) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.memStorage.Lock(ctx, name)
}
