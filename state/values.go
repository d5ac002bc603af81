package state

import (
	"context"
	"sync"
	"time"
)

// Values are byte values under keys, each with an expiry: what a cache
// shares across instances. A value is written and read whole; nothing is
// atomic across keys. LocalValues, in this package, keeps them in this
// process; state/redisstate's State keeps them on Redis, where every
// instance reads what any instance wrote. Both pass one conformance suite
// (statetest.RunValues).
type Values interface {
	// GetValue returns the value of key, and false when it has none: never
	// set, deleted or expired. The bytes are the caller's.
	GetValue(ctx context.Context, key string) ([]byte, bool, error)

	// SetValue sets key to value, replacing what it held, until ttl from
	// now (ttl <= 0: it never expires). The value is copied: the caller
	// may change its bytes afterwards.
	SetValue(ctx context.Context, key string, value []byte, ttl time.Duration) error

	// DeleteValue deletes key; deleting none is no error.
	DeleteValue(ctx context.Context, key string) error
}

// LocalValues are Values in this process: one machine, no configuration.
// Expired values are dropped as they are read and, now and then, by a
// sweep, so memory holds what is live. It bounds nothing else: a caller
// that must bound its memory (the response cache on one machine) keeps
// its own bounded store.
type LocalValues struct {
	now func() time.Time

	mu      sync.Mutex
	values  map[string]localValue
	ops     int // writes since the last sweep
	sweepAt int
}

type localValue struct {
	data    []byte
	expires instant // 0: never
}

// NewLocalValues returns empty in-process Values.
func NewLocalValues() *LocalValues { return newLocalValues(time.Now) }

func newLocalValues(now func() time.Time) *LocalValues {
	return &LocalValues{now: now, values: make(map[string]localValue), sweepAt: 1024}
}

var _ Values = (*LocalValues)(nil)

// GetValue implements Values.
func (v *LocalValues) GetValue(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	lv, ok := v.values[key]
	if !ok {
		return nil, false, nil
	}
	if lv.expires != 0 && lv.expires <= instantOf(v.now()) {
		delete(v.values, key)
		return nil, false, nil
	}
	return append([]byte{}, lv.data...), true, nil
}

// SetValue implements Values.
func (v *LocalValues) SetValue(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lv := localValue{data: append([]byte{}, value...)}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := instantOf(v.now())
	if ttl > 0 {
		lv.expires = now.after(ttl)
	}
	v.values[key] = lv
	v.ops++
	if v.ops >= v.sweepAt {
		v.sweep(now)
	}
	return nil
}

// DeleteValue implements Values.
func (v *LocalValues) DeleteValue(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.mu.Lock()
	delete(v.values, key)
	v.mu.Unlock()
	return nil
}

// sweep drops the expired values. The next sweep comes after as many
// writes as there are values left (at least 1024), so sweeping costs a
// constant share of the writes.
func (v *LocalValues) sweep(now instant) {
	for k, lv := range v.values {
		if lv.expires != 0 && lv.expires <= now {
			delete(v.values, k)
		}
	}
	v.ops = 0
	v.sweepAt = max(1024, len(v.values))
}

// Len is the number of values held, expired ones not yet dropped
// included.
func (v *LocalValues) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.values)
}
