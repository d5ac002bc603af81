package retention

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/modelgate/modelgate/state"
)

// Ledger counts the bytes each owner stores, on the state the instances
// share (one counter per owner, named by the owner's folder), for a
// storage quota that holds across instances.
//
// A counter that is missing — the first time an owner is asked about, on
// a state that lost it (an in-process state after a restart), or once it
// expired — is seeded from the storage: the sum of the owner's objects of
// every Kind, created only if still missing, so that instances seeding at
// once seed it once. It expires TTL after it was seeded and is then
// counted from the storage again: what went wrong between a write and its
// count (a crash, a state that could not be reached, two deletions of one
// object racing) lasts at most that long.
type Ledger struct {
	st    state.State
	ttl   time.Duration
	kinds []Kind

	// seeding lets one scan of an owner run at a time in this process:
	// the others wait and find the counter seeded.
	seeding [64]sync.Mutex
	seed    maphash.Seed
}

// counterName is the name of an owner's counter, in the owner's scope.
const counterName = "stored_bytes"

// NewLedger returns a Ledger on st whose counters are seeded from kinds
// and live ttl (at least a minute).
func NewLedger(st state.State, ttl time.Duration, kinds ...Kind) *Ledger {
	return &Ledger{st: st, ttl: max(ttl, time.Minute), kinds: kinds, seed: maphash.MakeSeed()}
}

// Count sums the bytes of the objects the owner whose folder is dir has
// in the storage now: what a counter is seeded with.
func (l *Ledger) Count(ctx context.Context, dir string) (int64, error) {
	var total int64
	for _, k := range l.kinds {
		if err := k.Scan(ctx, dir, func(o Object) { total += o.Bytes }); err != nil {
			return 0, fmt.Errorf("counting the owner's %s: %w", k.Name(), err)
		}
	}
	return total, nil
}

// scratch holds the ops of one Apply and their results: a state may keep
// them past the call (they escape), and the quota is checked on request
// paths, so they are reused rather than allocated per call.
type scratch struct {
	ops [2]state.Op
	res [2]state.Result
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// apply applies ops (at most two) in dir's scope and returns the results.
func (l *Ledger) apply(ctx context.Context, dir string, sc *scratch, ops ...state.Op) (bool, []state.Result, error) {
	n := copy(sc.ops[:], ops)
	ok, err := l.st.Apply(ctx, dir, sc.ops[:n], sc.res[:n])
	return ok, sc.res[:n], err
}

// Used returns the bytes the owner whose folder is dir stores.
func (l *Ledger) Used(ctx context.Context, dir string) (int64, error) {
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	for attempt := 0; ; attempt++ {
		ok, res, err := l.apply(ctx, dir, sc, state.Op{Kind: state.OpExists, Name: counterName}, state.Op{Kind: state.OpGet, Name: counterName})
		switch {
		case err != nil:
			return 0, err
		case ok:
			return res[1].Value, nil
		case attempt == 2:
			return 0, errVanished
		}
		if err := l.seedCounter(ctx, dir); err != nil {
			return 0, err
		}
	}
}

// Reserve counts n more bytes for the owner whose folder is dir if they
// fit within limit (what is counted plus n is at most limit), at once
// across instances. It returns what is counted after it, or, when n does
// not fit, what is counted.
func (l *Ledger) Reserve(ctx context.Context, dir string, n, limit int64) (used int64, ok bool, err error) {
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	for attempt := 0; ; attempt++ {
		ok, res, err := l.apply(ctx, dir, sc, state.Op{Kind: state.OpExists, Name: counterName},
			state.Op{Kind: state.OpReserve, Name: counterName, N: n, Limit: limit})
		switch {
		case err != nil:
			return 0, false, err
		case ok:
			return res[1].Value, true, nil
		case !res[0].Missing:
			return res[1].Value, false, nil
		case attempt == 2:
			return 0, false, errVanished
		}
		if err := l.seedCounter(ctx, dir); err != nil {
			return 0, false, err
		}
	}
}

// Add counts delta more bytes (fewer, when negative) for the owner whose
// folder is dir: a write, or a deletion. An owner without a counter is
// left without one: its counter is seeded from the storage, which holds
// the change, when it is next asked about.
func (l *Ledger) Add(ctx context.Context, dir string, delta int64) error {
	if delta == 0 {
		return nil
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	_, _, err := l.apply(ctx, dir, sc, state.Op{Kind: state.OpAdd, Name: counterName, N: delta, IfExists: true})
	return err
}

// errVanished is returned when a counter seeded three times was missing
// each time after (a state that drops what it is given).
var errVanished = errors.New("retention: an owner's stored bytes vanished from the state while being counted, three times")

// seedCounter creates the counter of the owner whose folder is dir from
// what the storage holds, unless it exists by then.
func (l *Ledger) seedCounter(ctx context.Context, dir string) error {
	mu := &l.seeding[maphash.String(l.seed, dir)%uint64(len(l.seeding))]
	mu.Lock()
	defer mu.Unlock()
	var res [1]state.Result
	ok, err := l.st.Apply(ctx, dir, []state.Op{{Kind: state.OpExists, Name: counterName}}, res[:])
	if err != nil || ok {
		return err // seeded while this one waited
	}
	total, err := l.Count(ctx, dir)
	if err != nil {
		return err
	}
	_, err = l.st.Apply(ctx, dir, []state.Op{{Kind: state.OpInit, Name: counterName, N: total, TTL: l.ttl}}, res[:])
	return err
}
