// Package quota enforces the rate limits and the budgets of keys and of
// their owners, over the shared state (state.State: in process on one
// machine, on Redis across instances).
//
// A request is admitted before it is sent (Admit) and settled when it is
// over (Admission.Done):
//
//   - Rate limits: requests per minute and tokens per minute count in
//     sliding one-minute windows (the request's estimated tokens when it
//     is admitted, corrected to the answer's tokens in the same window
//     when it is done); concurrent requests hold a slot each, until Done
//     or for at most Config.Hold.
//   - Budgets (per UTC day, per UTC month, or in total) reserve the
//     request's estimated cost before it is sent, and settle to its actual
//     cost after: a request is admitted only if what was spent plus what
//     is reserved plus its estimate stays within the budget.
//
// Admission is all or nothing, across every limit of the key and of its
// owner: one atomic state.Apply (one Redis script). When one limit refuses
// nothing is counted against the others.
//
// Overshoot: concurrent requests cannot pass a budget together, since each
// reserves before it is sent. A budget can only be passed by requests
// that cost more than their estimate: the spend of a period exceeds the
// budget by at most the sum of (actual cost − reserved estimate) of the
// requests in flight when the last one was admitted, plus the estimates
// of requests that ran longer than their reservation lived (Hold to twice
// Hold) — nothing is counted twice, and refused requests count nothing.
//
// Leases: with Config.Lease (a state shared by instances over a network),
// the large limits and budgets are leased to this instance in slices, so
// that a request in the steady state is admitted and settled without a
// round trip to the state: see lease.go for how slices are sized, settled
// and given back, and for what that gives up.
//
// Durability: the spend of a budget period lives in the state. On Redis
// it survives restarts of the gateway; in process it does not, so the
// first time a budget counter is used and found missing (after a start,
// at the start of a period, after a budget change, or after Redis lost
// its data) it is seeded from the durable usage records (Spender), with a
// set-if-absent, so that instances seeding at once seed it once.
//
// This package imports nothing of Caddy.
package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// Limits are the rate limits of a key or an owner; 0 is no limit.
type Limits struct {
	RequestsPerMinute int64
	TokensPerMinute   int64
	Concurrent        int64
}

// Period is the period a budget is spent over.
type Period string

// The periods of a budget: a UTC calendar day, a UTC calendar month, or
// for ever.
const (
	Day   Period = "day"
	Month Period = "month"
	Total Period = "total"
)

// ParsePeriod reads a budget period: day, month or total.
func ParsePeriod(s string) (Period, error) {
	switch p := Period(s); p {
	case Day, Month, Total:
		return p, nil
	}
	return "", fmt.Errorf("budget period %q: use day, month or total", s)
}

// Budget is how much a key or an owner may spend per period.
type Budget struct {
	// Amount is the budget; 0 is no budget.
	Amount pricing.Money
	Period Period
}

// Kind is who a subject is.
type Kind uint8

// The kinds of subjects.
const (
	KindKey Kind = iota + 1
	KindOwner
)

func (k Kind) String() string {
	if k == KindOwner {
		return "owner"
	}
	return "key"
}

// Subject is a key or an owner with the limits and the budget that apply
// to it: the caller resolves them (its own, else the default).
type Subject struct {
	// ID is the key's id or the owner; an owner with no ID is no owner.
	ID string
	// Name is what refusals call it (a key's name).
	Name   string
	Limits Limits
	Budget Budget
}

// Subjects are what a request counts against: its key, and the key's
// owner when it has one.
type Subjects struct {
	Key   Subject
	Owner Subject
}

// Ask is what a request asks to be admitted with.
type Ask struct {
	// EstimatedTokens count against the tokens per minute (at least 1).
	EstimatedTokens int64
	// EstimatedCost is reserved from the budgets (at least one
	// nano-dollar, so that a spent budget refuses every request, priced
	// or not). An unpriced request asks 0.
	EstimatedCost pricing.Money
	// Rate makes the rate limits apply; false for batch lines, which
	// count against budgets only.
	Rate bool
}

// Actual is what an admitted request used.
type Actual struct {
	// Tokens replace the estimate in the tokens-per-minute window the
	// request was counted in.
	Tokens int64
	// Cost is spent from the budgets when Priced.
	Cost pricing.Money
	// Priced is false for a request whose model has no price: it settles
	// 0, and the caller counts it as unpriced in the usage.
	Priced bool
}

// Spender tells what a key or an owner spent over a time range, by the
// durable usage records: what budgets are seeded from. *usage.Recorder is
// one.
type Spender interface {
	Spent(ctx context.Context, by usage.Dimension, id string, from, to time.Time) (pricing.Money, error)
}

// Config configures a Quota.
type Config struct {
	// State holds the counters. Required.
	State state.Atomic
	// Spender seeds the budget counters. nil: they start at 0.
	Spender Spender
	// Hold bounds how long a request that never calls Done (its instance
	// crashed) holds its concurrency slot (Hold) and its budget
	// reservation (Hold to twice Hold). A request running longer than Hold
	// loses its slot and reservation early. Default: 15 minutes.
	Hold time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Lease, when not nil, leases the counters of large limits and
	// budgets to this instance in slices (lease.go): for a State shared
	// by instances over a network, where each Apply is a round trip.
	// Start and Stop run its background work.
	Lease *Leasing
	// Logger receives what the background work of leases, and of
	// settlements sent again, could not do. Default: none.
	Logger *zap.Logger
	// Shared says that the State is shared over a network, where an
	// Apply's answer can be lost after the state applied it (resend.go):
	// admissions that reserve from a budget or take a concurrency slot
	// then carry a mark, which counts their settlement once however often
	// it is sent, and undoes them once if their answer was lost. Stop
	// ends the sending again.
	Shared bool
}

// Quota admits requests against limits and budgets. It is safe for
// concurrent use.
type Quota struct {
	st      state.Atomic
	spender Spender
	hold    time.Duration
	now     func() time.Time

	names     nameCache
	holderSeq atomic.Uint64 // slot holders: prefix + number
	markSeq   atomic.Uint64 // admissions' marks: "mark/" + prefix + number
	prefix    string
	shared    bool
	log       *zap.Logger
	resend    resender

	seedMu sync.Mutex
	seeds  map[string]*seedCall

	leases *leaser // nil without leasing
}

// window is the rate window of requests and tokens per minute.
var window = state.Window{Size: time.Minute, Sliding: true}

// New returns a Quota.
func New(c Config) (*Quota, error) {
	if c.State == nil {
		return nil, errors.New("quota: no state")
	}
	if c.Hold <= 0 {
		c.Hold = 15 * time.Minute
	}
	if c.Hold < time.Second {
		return nil, fmt.Errorf("quota: hold %v is under a second", c.Hold)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	q := &Quota{st: c.State, spender: c.Spender, hold: c.Hold, now: c.Now, shared: c.Shared, log: c.Logger,
		prefix: ids.New("", time.Now())[12:] + ":", seeds: make(map[string]*seedCall)}
	q.resend.stop = make(chan struct{})
	if c.Lease != nil {
		var err error
		if q.leases, err = newLeaser(q, *c.Lease, q.log); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// life is how long the lease buckets of budgets are: 0 without leasing.
func (q *Quota) life() time.Duration {
	if q.leases == nil {
		return 0
	}
	return q.leases.c.Life
}

// Admission is an admitted request: what its headers say, and what Done
// settles.
type Admission struct {
	q       *Quota
	scope   string
	at      time.Time
	headers RateLimits
	holder  string // of the concurrency slots
	subj    [2]admitted
	done    atomic.Bool
	// leased: admitted from what this instance holds (lease.go), and
	// settled there.
	leased bool
	// mark is the admission's mark in the state (resend.go), which its
	// settlement deletes: it counts once, however often it is sent. "":
	// none.
	mark string
	// detached is the context Done settles with.
	detached detached
}

// admitted is what one subject counted for an admission: tokens in its
// tpm window (0: none), a reservation from its budget b (nil: none), a
// concurrency slot. When leasing, sl are the subject's leases, and bl the
// budget's lease a leased admission reserved from.
type admitted struct {
	n        *names
	b        *budgetNames
	tokens   int64
	reserved int64
	conc     bool
	sl       *subjectLeases
	bl       *budgetLease
}

// At is when the request was admitted: the time its windows and budget
// period were counted at. Record its usage under usage.DayOf(At()), so
// that a request admitted before midnight and finished after it is spent
// in one period.
func (a *Admission) At() time.Time { return a.at }

// Headers are the rate-limit headers of the admitted request: of the
// key's and the owner's limits, the one with the fewest left for
// requests, and likewise for tokens.
func (a *Admission) Headers() RateLimits { return a.headers }

// plan is where the ops of one subject are in an Apply.
type plan struct {
	kind                      Kind
	s                         Subject
	n                         *names
	b                         *budgetNames
	rpm, tpm, conc, spent, rs int // op indexes; -1 none
	tokens, reserve           int64
	slot                      bool   // a concurrency slot is asked
	holder                    string // of the slot, made when an op asks it
	seed                      pricing.Money
	seeded                    bool // spent is initialised with seed
}

// maxOps is the most ops of an Apply of Admit, five for each of two
// subjects and the mark, and of Done, four for each and the mark's two.
const maxOps = 11

type scratch struct {
	ops  [maxOps]state.Op
	res  [maxOps]state.Result
	plan [2]plan
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// Admit admits a request of s, or refuses it. Exactly one of the
// admission, the refusal and the error is not nil. An error says the
// state (or, for a budget counter to seed, the usage records) could not
// be reached, and nothing was counted: whether to serve the request
// anyway is the caller's choice.
func (q *Quota) Admit(ctx context.Context, s Subjects, a Ask) (*Admission, *Refusal, error) {
	if s.Key.ID == "" {
		return nil, nil, errors.New("quota: a request without a key id")
	}
	if err := checkBudgets(&s); err != nil {
		return nil, nil, err
	}
	at := q.now()
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	plans := q.plans(sc, &s, a, at)
	scope := plans[len(plans)-1].n.scope // the owner's, else the key's
	if q.leases != nil {
		if adm := q.leases.admit(plans, a, at, scope, true); adm != nil {
			return adm, nil, nil
		}
	}
	mark := q.markOf(plans)
	for attempt := 0; ; attempt++ {
		ops := q.build(sc, plans, a, at, mark)
		if len(ops) == 0 {
			return &Admission{q: q, scope: scope, at: at}, nil, nil
		}
		ok, err := q.st.Apply(ctx, scope, ops, sc.res[:len(ops)])
		if err != nil {
			// The state may have counted it all the same (it took the
			// script, and only its answer was lost): that is undone
			// once it answers again, if so.
			q.undoLater(scope, plans, mark)
			return nil, nil, err
		}
		if ok {
			adm := &Admission{q: q, scope: scope, at: at, mark: mark}
			for i := range plans {
				p := &plans[i]
				d := &adm.subj[i]
				d.n = p.n
				if p.tpm >= 0 {
					d.tokens = p.tokens
				}
				if p.rs >= 0 {
					d.b, d.reserved = p.b, p.reserve
				}
				if p.conc >= 0 {
					d.conc, adm.holder = true, p.holder
				}
			}
			adm.headers = rateLimits(plans, sc.res[:], false)
			if q.leases != nil {
				q.leases.noteExact(plans, a, at, scope, sc.res[:])
			}
			return adm, nil, nil
		}
		// A budget counter to seed, and nothing else refused: seed it
		// and try again.
		if !q.refusedBesidesSeeds(plans, sc.res[:]) {
			if attempt == 2 {
				return nil, nil, errors.New("quota: budget counters vanished while being seeded, three times")
			}
			for i := range plans {
				p := &plans[i]
				if p.spent >= 0 && !p.seeded && sc.res[p.spent].Missing {
					seed, err := q.seed(ctx, p)
					if err != nil {
						return nil, nil, err
					}
					p.seed, p.seeded = seed, true
				}
			}
			continue
		}
		ref := q.refusal(plans, sc.res[:], at)
		if ref == nil {
			return nil, nil, errors.New("quota: the state refused a request without saying which limit")
		}
		if err := q.keepSeeds(ctx, scope, plans, sc); err != nil {
			return nil, nil, err
		}
		return nil, ref, nil
	}
}

func checkBudgets(s *Subjects) error {
	for _, b := range []Budget{s.Key.Budget, s.Owner.Budget} {
		if b.Amount > 0 {
			if _, err := ParsePeriod(string(b.Period)); err != nil {
				return fmt.Errorf("quota: %w", err)
			}
		}
	}
	return nil
}

// plans works out which limits of which subjects apply.
func (q *Quota) plans(sc *scratch, s *Subjects, a Ask, at time.Time) []plan {
	n := 1
	sc.plan[0] = plan{kind: KindKey, s: s.Key}
	if s.Owner.ID != "" {
		sc.plan[1] = plan{kind: KindOwner, s: s.Owner}
		n = 2
	}
	plans := sc.plan[:n]
	for i := range plans {
		p := &plans[i]
		p.n = q.names.get(p.kind, p.s.ID)
		p.tokens = max(a.EstimatedTokens, 1)
		p.reserve = int64(max(a.EstimatedCost, 1))
		if p.s.Budget.Amount > 0 {
			p.b = p.n.budgetAt(p.s.Budget, at, q.hold, q.life())
		}
		p.slot = a.Rate && p.s.Limits.Concurrent > 0
	}
	return plans
}

// holders names the slot holders of the plans that ask a concurrency
// slot: one name for the request, in each slot set.
func (q *Quota) holders(plans []plan) {
	holder := ""
	for i := range plans {
		p := &plans[i]
		if !p.slot || p.holder != "" {
			continue
		}
		if holder == "" {
			var buf [40]byte
			holder = string(strconv.AppendUint(append(buf[:0], q.prefix...), q.holderSeq.Add(1), 36))
		}
		p.holder = holder
	}
}

// build writes the ops of the plans into sc, and the mark's when there is
// one, and returns them.
func (q *Quota) build(sc *scratch, plans []plan, a Ask, at time.Time, mark string) []state.Op {
	q.holders(plans)
	ops := sc.ops[:0]
	add := func(op state.Op) int {
		ops = append(ops, op)
		return len(ops) - 1
	}
	for i := range plans {
		p := &plans[i]
		p.rpm, p.tpm, p.conc, p.spent, p.rs = -1, -1, -1, -1, -1
		l := &p.s.Limits
		if a.Rate && l.RequestsPerMinute > 0 {
			p.rpm = add(state.Op{Kind: state.OpTake, Name: p.n.rpm, Ref: &p.n.rpmRef, N: 1, Limit: l.RequestsPerMinute, Window: window, At: at})
		}
		if a.Rate && l.TokensPerMinute > 0 {
			p.tpm = add(state.Op{Kind: state.OpTake, Name: p.n.tpm, Ref: &p.n.tpmRef, N: p.tokens, Limit: l.TokensPerMinute, Window: window, At: at})
		}
		if p.holder != "" {
			p.conc = add(state.Op{Kind: state.OpAcquireSlot, Name: p.n.conc, Ref: &p.n.concRef, Holder: p.holder, Limit: l.Concurrent, TTL: q.hold})
		}
		if p.b != nil {
			if p.seeded {
				p.spent = add(state.Op{Kind: state.OpInit, Name: p.b.spent, Ref: &p.b.spentRef, N: int64(p.seed), TTL: q.spentTTL(p.b, at)})
			} else {
				p.spent = add(state.Op{Kind: state.OpExists, Name: p.b.spent, Ref: &p.b.spentRef})
			}
			p.rs = add(state.Op{Kind: state.OpReserve, Name: p.b.held, Ref: &p.b.heldRef, N: p.reserve, Limit: int64(p.s.Budget.Amount),
				With: p.b.with, TTL: q.heldTTL(p.b, at)})
		}
	}
	if mark != "" && len(ops) > 0 {
		add(state.Op{Kind: state.OpInit, Name: mark, N: 1, TTL: q.markTTL()})
	}
	return ops
}

// spentTTL keeps a period's spend until every request admitted in it has
// settled; total never expires.
func (q *Quota) spentTTL(b *budgetNames, at time.Time) time.Duration {
	if b.end.IsZero() {
		return 0
	}
	return b.end.Sub(at) + 2*q.hold + time.Minute
}

// heldTTL keeps a reservation bucket while it is counted: through the
// next bucket, and a second more for clocks a little apart.
func (q *Quota) heldTTL(b *budgetNames, at time.Time) time.Duration {
	h := q.hold.Milliseconds()
	return time.Duration((b.bucket+2)*h-at.UnixMilli())*time.Millisecond + time.Second
}

// refusedBesidesSeeds reports whether an op refused other than for a
// budget counter still to seed (whose reservation then means nothing).
func (q *Quota) refusedBesidesSeeds(plans []plan, res []state.Result) bool {
	for i := range plans {
		p := &plans[i]
		unseeded := p.spent >= 0 && res[p.spent].Missing && !p.seeded
		for _, j := range []int{p.rpm, p.tpm, p.conc, p.rs} {
			if j >= 0 && !res[j].OK && !(j == p.rs && unseeded) {
				return true
			}
		}
	}
	return false
}

// keepSeeds initialises, on their own, the budget counters a refused
// Apply would have seeded: a spent budget refuses every request, and each
// would otherwise read the usage records again.
func (q *Quota) keepSeeds(ctx context.Context, scope string, plans []plan, sc *scratch) error {
	var buf [2]state.Op
	var res [2]state.Result
	ops := buf[:0]
	for i := range plans {
		p := &plans[i]
		if p.seeded && p.spent >= 0 && sc.res[p.spent].Missing {
			ops = append(ops, sc.ops[p.spent])
		}
	}
	if len(ops) == 0 {
		return nil
	}
	_, err := q.st.Apply(ctx, scope, ops, res[:len(ops)])
	return err
}

// Done settles the request: its tokens replace the estimate in the
// window it was counted in, the budgets' reservations give way to the
// actual cost, and its concurrency slots are freed. Calling it again does
// nothing. It goes on when ctx is cancelled or past its deadline (the
// client went away): pass the request's context.
func (a *Admission) Done(ctx context.Context, actual Actual) error {
	if a == nil || !a.done.CompareAndSwap(false, true) {
		return nil
	}
	q := a.q
	if a.leased {
		return q.leases.done(ctx, a, actual)
	}
	if q.leases != nil {
		q.leases.exactDone(a)
	}
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	ops := sc.ops[:0]
	// A correction matters while the window it counted in is counted:
	// the current and the next minute.
	index, size, _, _ := state.WindowSpan(window, a.at)
	windowLive := q.now().UnixMilli() < (index+2)*size
	cost := int64(0)
	if actual.Priced {
		cost = int64(max(actual.Cost, 0))
	}
	for i := range a.subj {
		d := &a.subj[i]
		if d.tokens > 0 && windowLive {
			if delta := max(actual.Tokens, 0) - d.tokens; delta != 0 {
				ops = append(ops, state.Op{Kind: state.OpTake, Name: d.n.tpm, Ref: &d.n.tpmRef, N: delta, Limit: -1, Window: window, At: a.at})
			}
		}
		if b := d.b; b != nil {
			ops = append(ops, state.Op{Kind: state.OpAdd, Name: b.held, Ref: &b.heldRef, N: -d.reserved, IfExists: true})
			if cost != 0 {
				ops = append(ops, state.Op{Kind: state.OpAdd, Name: b.spent, Ref: &b.spentRef, N: cost, IfExists: true})
			}
		}
		if d.conc {
			ops = append(ops, state.Op{Kind: state.OpReleaseSlot, Name: d.n.conc, Ref: &d.n.concRef, Holder: a.holder})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if ctx.Done() != nil {
		a.detached.Context = ctx
		ctx = &a.detached
	}
	if a.mark == "" {
		_, err := q.st.Apply(ctx, a.scope, ops, sc.res[:len(ops)])
		return err
	}
	// Counted once: a settlement sent again finds the mark deleted.
	n := len(ops)
	ops = marked(ops, a.mark)
	ok, err := q.st.Apply(ctx, a.scope, ops, sc.res[:len(ops)])
	switch {
	case err != nil:
		q.resendLater(a.scope, ops)
	case !ok:
		// No mark: the request outlived it (or the state lost it). It
		// is settled without, this once.
		_, err = q.st.Apply(ctx, a.scope, ops[:n], sc.res[:n])
	}
	return err
}

// detached is a context without the cancellation and the deadline of its
// parent, as context.WithoutCancel makes, kept in the Admission so that
// Done allocates none (settling runs on every request). A context
// derived from it is never cancelled by the parent either: its Done is
// nil, which makes context.WithCancel and the like leave the parent
// alone. (Unlike WithoutCancel's, context.Cause of it may tell the
// parent's cause, while its Err is nil; the states read neither.)
type detached struct{ context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
