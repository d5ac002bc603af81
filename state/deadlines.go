package state

import (
	"context"
	"sync"
	"time"
)

// Deadlines are shared points in time, one per key, each kept until it
// passes: "leave this alone until T", as the router keeps a target it took
// out of rotation (an open circuit breaker, a provider's cool-down). A
// deadline only moves later: setting an earlier one keeps the later one,
// so instances that set one at once agree on the latest. It is gone once
// its time has passed, or when cleared.
//
// Times are the callers' wall clocks, in milliseconds; on Redis the key
// also expires by Redis's clock, so clocks a little apart only shift when
// a deadline disappears from the store, not what it says.
type Deadlines interface {
	// ExtendDeadline sets key's deadline to until unless it holds a later
	// one, and returns the deadline it holds afterwards.
	ExtendDeadline(ctx context.Context, key string, until time.Time) (time.Time, error)

	// GetDeadlines returns the deadlines of keys, in order: the zero time
	// for a key without one.
	GetDeadlines(ctx context.Context, keys ...string) ([]time.Time, error)

	// ClearDeadline removes key's deadline, whatever it is.
	ClearDeadline(ctx context.Context, key string) error
}

// LocalDeadlines are Deadlines in this process: what one instance needs
// alone, and what tests of several routers in one process share. The zero
// value is ready; Now may be set before first use.
type LocalDeadlines struct {
	// Now is the clock deadlines pass by. Default: time.Now.
	Now func() time.Time

	mu sync.Mutex
	m  map[string]int64 // key → deadline, Unix milliseconds
}

// NewLocalDeadlines returns empty in-process deadlines.
func NewLocalDeadlines() *LocalDeadlines { return &LocalDeadlines{} }

func (d *LocalDeadlines) nowMS() int64 {
	if d.Now != nil {
		return d.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// ExtendDeadline implements Deadlines.
func (d *LocalDeadlines) ExtendDeadline(_ context.Context, key string, until time.Time) (time.Time, error) {
	u := until.UnixMilli()
	now := d.nowMS()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = make(map[string]int64)
	}
	cur, ok := d.m[key]
	if ok && cur <= now {
		ok = false
	}
	switch {
	case ok && cur >= u:
		return time.UnixMilli(cur), nil
	case u <= now:
		// Already past: nothing to keep (Redis expires such a key at once).
		delete(d.m, key)
		return time.Time{}, nil
	}
	d.m[key] = u
	d.sweep(now)
	return time.UnixMilli(u), nil
}

// sweep drops passed deadlines once the map has grown, so that keys set
// once and never read again do not pile up.
func (d *LocalDeadlines) sweep(now int64) {
	if len(d.m) < 1024 {
		return
	}
	for k, v := range d.m {
		if v <= now {
			delete(d.m, k)
		}
	}
}

// GetDeadlines implements Deadlines.
func (d *LocalDeadlines) GetDeadlines(_ context.Context, keys ...string) ([]time.Time, error) {
	now := d.nowMS()
	out := make([]time.Time, len(keys))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, k := range keys {
		if v, ok := d.m[k]; ok && v > now {
			out[i] = time.UnixMilli(v)
		}
	}
	return out, nil
}

// ClearDeadline implements Deadlines.
func (d *LocalDeadlines) ClearDeadline(_ context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, key)
	return nil
}

var _ Deadlines = (*LocalDeadlines)(nil)
