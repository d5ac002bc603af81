package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/modelgate/modelgate/internal/storagetest"
)

// errCrashed is what a crashed view's writes fail with.
var errCrashed = errors.New("the process is dead")

// crashView is the storage as one process sees it: after crash, none of its
// writes or locks reach the storage any more, as if it had been killed; an
// Unlock still passes, so a lock it held is not left held forever (a real
// storage's lock would go stale and be taken over).
type crashView struct {
	*storagetest.Memory
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
	return c.Memory.Store(ctx, key, value)
}

func (c *crashView) Delete(ctx context.Context, key string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Memory.Delete(ctx, key)
}

func (c *crashView) Lock(ctx context.Context, name string) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Memory.Lock(ctx, name)
}
