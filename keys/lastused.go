package keys

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// usage is a key's last use as this process saw it.
type usage struct {
	used    atomic.Int64 // unix seconds of the last Touch; 0 for none
	written atomic.Int64 // unix seconds when this process last wrote last_used_at; 0 for never
}

// Touch notes that the key id was used now. It changes memory only; the
// next Refresh writes it to storage.
func (m *Manager) Touch(id string) {
	e := m.idx.Load().byID[id]
	if e == nil {
		return
	}
	now := m.now().Unix()
	// Most calls find the time already noted and write nothing shared.
	for {
		used := e.use.used.Load()
		if used >= now || e.use.used.CompareAndSwap(used, now) {
			return
		}
	}
}

// usedInterval is how often at most one Manager writes the last use of one
// key.
const usedInterval = 60 // seconds

// writeUsage writes last_used_at of the keys used since it was last
// written, each under its lock and only if the record still exists.
func (m *Manager) writeUsage(ctx context.Context) []error {
	var errs []error
	now := m.now().Unix()
	for id, e := range m.idx.Load().byID {
		used := e.use.used.Load()
		if used == 0 || (e.key.LastUsedAt != nil && *e.key.LastUsedAt >= used) {
			continue
		}
		if w := e.use.written.Load(); w != 0 && now-w < usedInterval {
			continue
		}
		err := m.withLock(ctx, id, func() error {
			k, digest, err := m.load(ctx, id)
			if err != nil {
				return err
			}
			if k.LastUsedAt != nil && *k.LastUsedAt >= used {
				return nil
			}
			k.LastUsedAt = &used
			return m.store(ctx, k, digest)
		})
		switch {
		case err == nil:
			e.use.written.Store(now)
		case errors.Is(err, ErrNotFound):
			// deleted elsewhere: never write it back
		default:
			errs = append(errs, fmt.Errorf("writing when key %s was last used: %w", id, err))
		}
		if ctx.Err() != nil {
			return append(errs, ctx.Err())
		}
	}
	return errs
}

// withUse gives k the last use this process noted, when it is later than
// the stored one (which is written at most once a minute).
func (m *Manager) withUse(k Key) Key {
	e := m.idx.Load().byID[k.ID]
	if e == nil {
		return k
	}
	if used := e.use.used.Load(); used != 0 && (k.LastUsedAt == nil || *k.LastUsedAt < used) {
		k.LastUsedAt = &used
	}
	return k
}
