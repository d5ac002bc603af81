package respcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelgate/modelgate/state"
)

// Shared is a Store on the shared state (state.Values): on Redis, every
// instance of a cluster reads the answers any instance stored. Entries
// expire by their ttl on the state's clock; the state bounds nothing else
// (see the docs: a Redis server's maxmemory policy does), so Cache's
// MaxEntrySize is what bounds each entry.
type Shared struct {
	values state.Values
}

// NewShared returns a Store on v.
func NewShared(v state.Values) *Shared { return &Shared{values: v} }

var _ Store = (*Shared)(nil)

// sharedName is the name of key's value on the state.
func sharedName(key Key) string { return "respcache:" + key.String() }

// Get implements Store. A value that is not an entry (written by another
// version, or damaged) is an error, and a miss.
func (s *Shared) Get(ctx context.Context, key Key) (Entry, bool, error) {
	b, ok, err := s.values.GetValue(ctx, sharedName(key))
	if err != nil || !ok {
		return Entry{}, false, err
	}
	e, err := decodeEntry(b)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: %s", err, sharedName(key))
	}
	return e, true, nil
}

var encodePool = sync.Pool{New: func() any { return new([]byte) }}

// Set implements Store.
func (s *Shared) Set(ctx context.Context, key Key, e Entry, ttl time.Duration) error {
	if ttl <= 0 {
		return nil
	}
	buf := encodePool.Get().(*[]byte)
	defer encodePool.Put(buf)
	*buf = e.encode((*buf)[:0])
	return s.values.SetValue(ctx, sharedName(key), *buf, ttl)
}
