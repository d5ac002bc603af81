package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Atomic applies several operations on counters, rate windows and slots
// at once, all or none. It is what lets a request count against every
// limit of its key and of the key's owner with one round trip to Redis,
// and count against none of them when one refuses.
type Atomic interface {
	// Apply applies ops in order, each one seeing the effect of those
	// before it, if every one of them fits; when one refuses, it applies
	// none. It reports whether it applied them, and fills results (as long
	// as ops) with what each op found: when applied, the counts after it;
	// when refused, the counts as they are and whether that op alone fits
	// (Result.OK).
	//
	// The names of ops are within scope: (scope, name) names a counter, a
	// rate window or a slot set of its own, apart from those of other
	// scopes and from those of the methods of Counters and Slots. A scope
	// is kept whole where the state is partitioned (on one node of a Redis
	// Cluster), which is what makes Apply atomic there; choose scopes that
	// spread the load, such as a tenant. The scope must not be empty.
	Apply(ctx context.Context, scope string, ops []Op, results []Result) (bool, error)
}

// OpKind is what an Op does.
type OpKind uint8

// The operations of Apply. Only OpExists, OpReserve, OpTake,
// OpAcquireSlot, OpAdvance and OpLeaseSlots can refuse; the others always
// fit.
const (
	// OpAdd adds N to the counter Name, as Counters.Add does (a new
	// counter expires TTL later; TTL <= 0: never). With IfExists it adds
	// only to a counter that exists, and reports Result.Missing
	// otherwise.
	OpAdd OpKind = iota + 1

	// OpInit creates the counter Name with the value N, expiring TTL
	// later, unless it exists: a set-if-absent, so that of several
	// instances seeding a counter at once only the first one does.
	// Result.Missing reports that it created it.
	OpInit

	// OpExists refuses, with Result.Missing, when the counter Name does
	// not exist.
	OpExists

	// OpGet reads the counter Name and the counters With; Result.Total is
	// their sum. It changes nothing.
	OpGet

	// OpReserve adds N to the counter Name only if the value of Name plus
	// those of the counters With plus N stays within Limit, as
	// Counters.Reserve does for one counter: a budget whose spend and
	// reservations are kept in several counters.
	OpReserve

	// OpTake counts N against Limit in the rate window Window of Name at
	// the time At, as Counters.Take does.
	OpTake

	// OpAcquireSlot takes one of Limit slots of Name for Holder until TTL
	// from now, or extends Holder's slot, as Slots.AcquireSlot does.
	OpAcquireSlot

	// OpReleaseSlot frees Holder's slot of Name, as Slots.ReleaseSlot
	// does.
	OpReleaseSlot

	// OpAdvance sets the counter Name to N, expiring TTL later (TTL <= 0:
	// never), if it is missing or below N, and refuses otherwise: a fence
	// of sequence numbers. An Apply that starts with it, sent again after
	// an error that left unknown whether it was applied (a timeout after
	// Redis took it), is applied once: the second time the fence refuses
	// and nothing else is applied. Result.Value is the counter before.
	OpAdvance

	// OpLeaseSlots holds, for Holder, the slots of Name numbered From to
	// From+N-1 (each a slot of its own, as a holder of OpAcquireSlot,
	// named Holder#i) until TTL from now: in order, renewing those Holder
	// has and taking new ones while fewer than Limit are taken, up to the
	// first that does not fit; those of the range after it are freed, so
	// that Holder holds From to From+Granted-1. It refuses when Granted
	// would be under Min. Result.Granted is how many Holder holds of the
	// range; Result.Slots how many of Name are taken.
	OpLeaseSlots

	// OpFreeSlots frees the slots From to From+N-1 of Holder in Name (see
	// OpLeaseSlots).
	OpFreeSlots

	// OpDelete deletes the counter Name. Result.Missing reports that it
	// did not exist; Result.Value is its value before. No later op of
	// the Apply may name the counter.
	OpDelete
)

var opNames = [...]string{OpAdd: "add", OpInit: "init", OpExists: "exists", OpGet: "get",
	OpReserve: "reserve", OpTake: "take", OpAcquireSlot: "acquire-slot", OpReleaseSlot: "release-slot",
	OpAdvance: "advance", OpLeaseSlots: "lease-slots", OpFreeSlots: "free-slots", OpDelete: "delete"}

func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one operation of Apply. Each kind reads the fields its doc names.
type Op struct {
	Kind OpKind
	// Name is the counter, the rate window or the slot set, within the
	// scope of the Apply.
	Name string
	// N is the amount to add, reserve, take or initialise.
	N int64
	// Limit bounds OpReserve, OpTake (< 0: none) and OpAcquireSlot.
	Limit int64
	// TTL is the life of a counter the op creates (<= 0: forever), or of
	// a slot.
	TTL time.Duration
	// IfExists makes OpAdd add only to an existing counter.
	IfExists bool
	// With are the counters OpGet and OpReserve count with Name.
	With []string
	// UpTo makes OpReserve and OpTake count as much of N as fits (N > 0),
	// but at least Min: they refuse only when not even Min fits (with
	// Min 0, never). Result.Granted is what they counted. A lease of a
	// slice of a limit is taken so.
	UpTo bool
	// Min is the least an UpTo op or OpLeaseSlots counts.
	Min int64
	// Window and At are OpTake's rate window and time.
	Window Window
	At     time.Time
	// Holder is the holder of a slot.
	Holder string
	// From is the first slot of OpLeaseSlots and OpFreeSlots.
	From int64
	// Ref, when not nil, is where the state may remember what Name
	// resolved to, for the next op with the same Ref (see Ref).
	Ref *Ref
}

// Ref lets a state find the counter, rate windows and slots of a name
// again without looking the name up: the in-process state (Local) keeps
// in it where they are, which saves a map lookup per op for a caller that
// keeps one Ref per name it applies ops on again and again (the quota
// engine, one per limit of a key); Redis ignores it. An op names the same
// counters with a Ref or without: a Ref last used with another name,
// scope or state is looked up again, as without one. A Ref may be used by
// concurrent Applies. The zero Ref is ready to use; it must not be copied
// after first use.
type Ref struct {
	e atomic.Pointer[localEntry]
}

// Result is what one op of Apply found.
type Result struct {
	// OK reports whether the op fits: it was applied, or would have been
	// had every op fit. Ops that cannot refuse always fit.
	OK bool
	// Missing: OpExists and OpAdd with IfExists found no counter; OpInit
	// found none and created it.
	Missing bool
	// Value is the value of the counter Name (OpAdd, OpInit, OpExists,
	// OpGet, OpReserve); 0 when it does not exist.
	Value int64
	// Total is Value plus the values of the counters With (OpGet,
	// OpReserve): what counts against Limit.
	Total int64
	// Taken is OpTake's outcome, as Counters.Take reports it. When the
	// Apply was refused, nothing was counted: Count leaves N out even if
	// OK.
	Taken Taken
	// Slots is how many slots of Name are taken (OpAcquireSlot,
	// OpReleaseSlot, OpLeaseSlots, OpFreeSlots).
	Slots int64
	// Granted is what an UpTo op counted, or how many slots of its range
	// OpLeaseSlots holds; when the Apply was refused, what they would have.
	Granted int64
}

// MaxSlotRange is the most slots one OpLeaseSlots or OpFreeSlots names.
const MaxSlotRange = 4096

// SlotName is the name of the i-th slot of holder that OpLeaseSlots
// takes, as other ops see it.
func SlotName(holder string, i int64) string {
	return holder + "#" + strconv.FormatInt(i, 10)
}

// ErrBadOp is returned by Apply for ops it cannot run: an unknown kind, an
// empty name or holder, results shorter than ops, an empty scope.
var ErrBadOp = errors.New("state: bad operation")

// CheckOps validates the arguments of Apply; implementations call it
// first.
func CheckOps(scope string, ops []Op, results []Result) error {
	if scope == "" {
		return fmt.Errorf("%w: empty scope", ErrBadOp)
	}
	if len(results) < len(ops) {
		return fmt.Errorf("%w: %d results for %d ops", ErrBadOp, len(results), len(ops))
	}
	for i := range ops {
		op := &ops[i]
		if op.Kind < OpAdd || op.Kind > OpDelete {
			return fmt.Errorf("%w: op %d has kind %d", ErrBadOp, i, op.Kind)
		}
		if op.Name == "" {
			return fmt.Errorf("%w: op %d (%v) has no name", ErrBadOp, i, op.Kind)
		}
		switch op.Kind {
		case OpAcquireSlot, OpReleaseSlot, OpLeaseSlots, OpFreeSlots:
			if op.Holder == "" {
				return fmt.Errorf("%w: op %d (%v) has no holder", ErrBadOp, i, op.Kind)
			}
		case OpTake:
			if op.Window.Size < time.Millisecond {
				return fmt.Errorf("%w: op %d (take) has a window under a millisecond", ErrBadOp, i)
			}
		}
		if op.UpTo && (op.Kind != OpReserve && op.Kind != OpTake || op.N <= 0 || op.Min < 0 || op.Min > op.N) {
			return fmt.Errorf("%w: op %d (%v) up to %d, at least %d", ErrBadOp, i, op.Kind, op.N, op.Min)
		}
		if (op.Kind == OpLeaseSlots || op.Kind == OpFreeSlots) && (op.From < 0 || op.N < 0 || op.N > MaxSlotRange || op.Min > op.N) {
			return fmt.Errorf("%w: op %d (%v) of slots %d to %d, at least %d", ErrBadOp, i, op.Kind, op.From, op.From+op.N-1, op.Min)
		}
	}
	return nil
}
