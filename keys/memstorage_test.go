package keys

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
)

// memStorage is an in-memory Storage: a map guarded by a mutex, with real
// cross-goroutine locks. Keys are "/"-separated paths; a "directory" exists
// while some key is under it. (Adapted from batch's.)
type memStorage struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks map[string]chan struct{} // held while present; closed on unlock

	// failWith, when set, fails every operation but Lock and Unlock.
	failWith error
	stores   int
}

func newMemStorage() *memStorage {
	return &memStorage{data: make(map[string][]byte), locks: make(map[string]chan struct{})}
}

func (m *memStorage) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failWith = err
}

func (m *memStorage) Store(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return m.failWith
	}
	m.stores++
	// A copy, as a real storage keeps the bytes, not the caller's buffer.
	m.data[key] = append([]byte(nil), value...)
	return nil
}

func (m *memStorage) Load(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return nil, m.failWith
	}
	v, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("loading %s: %w", key, fs.ErrNotExist)
	}
	return append([]byte(nil), v...), nil
}

func (m *memStorage) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWith != nil {
		return m.failWith
	}
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
	if m.failWith != nil {
		return nil, m.failWith
	}
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

// snapshot returns a copy of everything stored.
func (m *memStorage) snapshot() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.data))
	for k, v := range m.data {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// heldLocks returns the names of the locks held now.
func (m *memStorage) heldLocks() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.locks {
		out = append(out, k)
	}
	return out
}

func (m *memStorage) storeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stores
}
