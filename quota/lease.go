package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

// Leases: what an instance holds of the limits it shares with others, so
// that a request is admitted and settled without a round trip to the
// state (docs/design/leases.md).
//
// A limit is leased to an instance in slices: the instance counts a slice
// in the state in the background (an UpTo take or reservation: as much as
// fits), and admits requests from it in memory until less than half of
// it is left, when it asks for the next. Every unit an instance admits
// from was counted in the state before, so the state's count is never
// below what the instances admitted:
//
//   - Requests and tokens per minute: a slice is taken in the current
//     fixed window of the sliding one-minute window, and used in that
//     window only; what is left of it when the window ends, or when the
//     slice goes unused for Leasing.Idle, is given back (a correction of
//     the window it was taken in). A request's tokens are corrected to
//     the answer's in the slice while its window lasts (what the estimate
//     held beyond the answer goes back to the slice, what the answer used
//     beyond the estimate comes out of it), else in the state.
//   - Budgets: a slice is reserved, beside the spend and the reservations
//     of requests admitted one by one, in a lease bucket counter of its
//     own, Leasing.Life long; the instance moves what it holds (its
//     unused slice and the estimates of its requests in flight) to each
//     new bucket, so what it holds is counted while it runs, and two
//     buckets at most after it died. A request's cost is added to the
//     spend and taken from the bucket together, in the background.
//   - Concurrency: an instance holds a range of slots of the set each
//     request takes one of (OpLeaseSlots), renewed every third of
//     Leasing.Life: they expire Life after the instance died.
//
// A slice holds about Leasing.Horizon of the instance's recent use, and
// at most 1/Leasing.Share of the limit. A limit whose share cannot hold
// two requests (a request's tokens, its estimated cost), or an instance
// whose use would not fill one, is not leased: its requests are counted
// one by one in the state, exactly, as without leasing. So is a request
// that finds its slices short: leases only ever save round trips.
//
// The background work — refills, corrections, settlements, what goes
// back — runs every Leasing.Interval, and at once when a slice runs low:
// one Apply per scope, every scope at once (the Redis state pipelines
// them). An Apply that failed without saying whether it was applied is
// sent again as it was, fenced by a sequence number (state.OpAdvance), so
// that nothing is counted twice; a slice granted by an Apply whose answer
// was lost is counted in the state and unknown to the instance until its
// window or bucket ends (slots: until the instance takes them again,
// which renews them).
//
// What leasing gives up: an instance holding an unused slice keeps other
// instances from it until it uses or gives it back, so a limit across N
// instances may refuse requests up to a slice per instance before it is
// reached (the others' unused slices, and the refill on its way of the
// instance refusing): at most N/Share of it. And the rate-limit headers
// of a request admitted from a slice tell what was left at the
// instance's last round trip, as it sees it. A limit is never passed by
// more than without leasing: by requests that cost more than their
// estimates (budgets, tokens per minute), settled within an Interval
// rather than at once.

// Leasing configures leases. The zero value takes every default.
type Leasing struct {
	// Life is how long the slices of budgets and of concurrency slots an
	// instance holds outlive it when it dies (it renews them while it
	// runs): a budget's, up to twice that and a second. Default: 10s.
	Life time.Duration
	// Share: a slice holds at most 1/Share of a limit. Default: 16.
	Share int64
	// Horizon: a slice holds about this long of the instance's recent
	// use of a limit. Default: 250ms.
	Horizon time.Duration
	// Idle: a slice unused this long is given back. Default: 1s.
	Idle time.Duration
	// Interval is how often the background work runs. Default: 100ms.
	Interval time.Duration
}

func (c Leasing) withDefaults() (Leasing, error) {
	if c.Life == 0 {
		c.Life = 10 * time.Second
	}
	if c.Share == 0 {
		c.Share = 16
	}
	if c.Horizon == 0 {
		c.Horizon = 250 * time.Millisecond
	}
	if c.Idle == 0 {
		c.Idle = time.Second
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	switch {
	case c.Life < time.Second:
		return c, fmt.Errorf("quota: lease life %v is under a second", c.Life)
	case c.Share < 1:
		return c, fmt.Errorf("quota: lease share %d is under 1", c.Share)
	case c.Horizon < time.Millisecond || c.Idle < time.Millisecond || c.Interval < time.Millisecond:
		return c, errors.New("quota: lease horizon, idle and interval must be a millisecond or more")
	case c.Interval*3 > c.Life:
		return c, fmt.Errorf("quota: lease interval %v is over a third of the lease life %v", c.Interval, c.Life)
	}
	return c, nil
}

// fenceTTL is how long a scope keeps the sequence number of an instance's
// last settlement; a settlement in doubt is sent again for half as long
// at most, then dropped (and logged): nothing is counted twice.
const fenceTTL = time.Hour

// leaser holds this instance's leases and runs their background work.
type leaser struct {
	q   *Quota
	c   Leasing
	log *zap.Logger
	// holder holds this instance's leased concurrency slots; fence is the
	// counter, in each scope, of its settlements' sequence numbers.
	holder, fence string
	seq           atomic.Int64

	mu       sync.Mutex
	subjects map[*subjectLeases]struct{} // those with anything to do
	doubt    map[string]*leaseBatch      // by scope: sent, and not known to be applied

	wake    chan struct{}
	stop    chan struct{}
	ended   chan struct{} // the loop ended
	started bool
	stopped atomic.Bool
}

func newLeaser(q *Quota, c Leasing, log *zap.Logger) (*leaser, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return &leaser{q: q, c: c, log: log, holder: q.prefix + "lease", fence: "fence/" + q.prefix,
		subjects: make(map[*subjectLeases]struct{}), doubt: make(map[string]*leaseBatch),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), ended: make(chan struct{})}, nil
}

// subjectLeases are what this instance holds of one subject's limits. Its
// mutex guards every field; a request admitted from leases locks those of
// its key, then of its owner.
type subjectLeases struct {
	mu sync.Mutex
	n  *names
	// scope is the Apply scope the subject's counters are in: its owner's
	// (a key whose owner changed gets new leases).
	scope    string
	rpm, tpm windowLease
	conc     slotLease
	budget   *budgetLease
	retired  []*budgetLease // of past periods or amounts, until settled
	inflight int            // requests admitted from these leases, not done
	active   atomic.Bool    // in leaser.subjects
}

// use is how an instance has been using a limit lately: units per
// second, and the largest one request needed.
type use struct {
	n       int64   // used since at
	at      int64   // Unix ms
	perSec  float64 // smoothed
	need    int64   // the most one request needed since at
	needEst int64   // the most one request needed lately
	burst   int64   // the most used between two updates lately
	burstAt int64   // Unix ms when burst was last reached
	last    int64   // Unix ms of the last use
}

func (u *use) add(n, now int64) {
	u.n += n
	u.need = max(u.need, n)
	u.last = now
}

// update folds what was used since the last update into the rate, at
// most every interval ms.
func (u *use) update(now, interval int64) {
	if u.at == 0 {
		u.at = now
		return
	}
	dt := now - u.at
	if dt < interval {
		return
	}
	rate := float64(u.n) * 1000 / float64(dt)
	if u.perSec == 0 {
		u.perSec = rate
	} else {
		u.perSec = (u.perSec + rate) / 2
	}
	if u.perSec < 1e-3 {
		u.perSec = 0
	}
	if u.need > 0 {
		// The largest need lately: a larger one at once, a smaller one
		// slowly; none keeps it.
		u.needEst = max(u.need, u.needEst-u.needEst/8)
	}
	// The most used between two updates lately: requests that come
	// together (clients that send again when answered) need a slice that
	// holds them together. It is kept for burstHold intervals, then
	// decays.
	switch {
	case u.n >= u.burst:
		u.burst, u.burstAt = u.n, now
	case now-u.burstAt >= burstHold*interval:
		u.burst -= u.burst / 8
	}
	u.n, u.need, u.at = 0, 0, now
}

// burstHold is how many intervals a use's burst is kept before it
// decays.
const burstHold = 20

// slice is the size of a slice of a limit for u: about horizon of its
// use, or twice what it used at once lately if more (a slice is refilled
// when half of it is left: half holds such a burst), at most
// limit/share; 0 when that would not hold two requests' needs at the
// limit's share, or one at the rate of use.
func (u *use) slice(limit int64, c *Leasing) int64 {
	share := limit / c.Share
	need := max(u.needEst, 1)
	if share < 2*need {
		return 0
	}
	want := int64(math.Ceil(u.perSec * c.Horizon.Seconds()))
	if want < need {
		return 0
	}
	return min(max(want, 2*u.burst), share)
}

// windowLease is a slice of a requests- or tokens-per-minute limit, taken
// in one fixed window.
type windowLease struct {
	limit     int64
	index     int64 // the fixed window avail was taken in
	avail     int64
	remaining int64 // what the state said was left besides avail, lately
	want      int64 // the slice sought
	asking    bool  // a refill is on its way
	kicked    bool  // a round was asked for, to refill it
	drop      bool  // the limit changed: give avail back
	use       use
	corr      []correction // for the state
}

// correction is a count for a window of the state: n at the time at,
// in the fixed window index.
type correction struct {
	index int64
	at    time.Time
	n     int64
}

// correct adds n at the time at (in the fixed window index) to what w
// has for the state: one correction per window, however many requests
// it sums.
func (w *windowLease) correct(index int64, at time.Time, n int64) {
	for i := range w.corr {
		if w.corr[i].index == index {
			w.corr[i].n += n
			return
		}
	}
	w.corr = append(w.corr, correction{index: index, at: at, n: n})
}

// has reports whether w holds n in window index for limit.
func (w *windowLease) has(limit, index, n int64) bool {
	return w.limit == limit && w.index == index && !w.drop && w.avail >= n
}

// low reports whether w should ask for a refill in window index, and
// notes that it asks: a request that finds it low asks for a round once,
// not every request after it until the round.
func (w *windowLease) low(index int64) bool {
	if w.kicked || w.asking || w.want == 0 || w.index == index && w.avail >= (w.want+1)/2 {
		return false
	}
	w.kicked = true
	return true
}

// giveBack returns n of window index to the slice, or to the state when
// the slice is of another window or holds enough.
func (w *windowLease) giveBack(n, index int64, at time.Time) {
	if w.index == index && !w.drop {
		keep := max(0, min(n, w.want-w.avail))
		w.avail += keep
		n -= keep
	}
	if n > 0 {
		w.correct(index, at, -n)
	}
}

// slotLease is a range of concurrency slots: holder#0 to holder#held-1.
type slotLease struct {
	limit    int64
	held     int64
	inflight int64 // requests admitted from the slots
	exact    int64 // requests admitted one by one, in flight
	peak     int64 // the most in flight since peakAt (Unix ms)
	peakAt   int64
	peakEst  int64 // the most in flight lately
	want     int64 // free slots sought
	asking   bool
	kicked   bool
	renewed  int64 // Unix ms
	last     int64 // Unix ms of the last request
}

// has reports whether s holds a free slot for limit.
func (s *slotLease) has(limit int64) bool { return s.limit == limit && s.held-s.inflight >= 1 }

// low reports whether s should ask for more slots, and notes that it
// asks (see windowLease.low).
func (s *slotLease) low() bool {
	if s.kicked || s.asking || s.want == 0 || s.held-s.inflight >= (s.want+1)/2 {
		return false
	}
	s.kicked = true
	return true
}

// busy notes a request admitted at now, for the peak in flight.
func (s *slotLease) busy(now int64) {
	s.peak = max(s.peak, s.inflight+s.exact)
	s.last = now
}

// budgetLease is a slice of a budget in one period, at one amount.
type budgetLease struct {
	budget Budget
	spent  string // the spend's counter, which names the period and amount
	base   string // the lease buckets' counters but their number
	end    time.Time
	// avail is the unused slice (below 0: what answers cost beyond their
	// estimates, to be covered by the next slice); inflight the estimates
	// of the requests admitted from it and not done.
	avail, inflight int64
	// inState is what the state counts for this instance in lease bucket
	// bucket, once the batches sent are applied; the state is brought to
	// avail + inflight.
	inState, bucket int64
	pending         int64 // spent, for the state
	seeded          bool  // the spend's counter was found in the state
	want            int64
	asking, kicked  bool
	use             use
}

// low reports whether b should ask for a refill, and notes that it asks
// (see windowLease.low).
func (b *budgetLease) low() bool {
	if b.kicked || b.asking || b.want == 0 || b.avail >= (b.want+1)/2 {
		return false
	}
	b.kicked = true
	return true
}

// settled reports whether b holds nothing and has nothing for the state.
func (b *budgetLease) settled() bool {
	return b.inflight == 0 && b.pending == 0 && b.inState == 0 && b.avail == 0
}

// subject returns the leases of n in scope, made (and replacing those of
// another scope) when create; nil when there are none.
func (l *leaser) subject(n *names, scope string, create bool) *subjectLeases {
	for {
		sl := n.leases.Load()
		if sl != nil && sl.scope == scope {
			l.activate(sl)
			return sl
		}
		if !create {
			return nil
		}
		fresh := &subjectLeases{n: n, scope: scope}
		if n.leases.CompareAndSwap(sl, fresh) {
			l.activate(fresh)
			return fresh
		}
	}
}

// activate puts sl among the subjects the background work visits.
func (l *leaser) activate(sl *subjectLeases) {
	if sl.active.Load() {
		return
	}
	l.mu.Lock()
	l.subjects[sl] = struct{}{}
	sl.active.Store(true)
	l.mu.Unlock()
}

// kick asks for a round of background work now.
func (l *leaser) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// admit admits the request of plans from the leases it has, asking the
// state nothing, or returns nil. With create it makes the leases it does
// not find, for the background work to fill.
func (l *leaser) admit(plans []plan, a Ask, at time.Time, scope string, create bool) *Admission {
	var sls [2]*subjectLeases
	for i := range plans {
		if sls[i] = l.subject(plans[i].n, scope, create); sls[i] == nil {
			return nil
		}
	}
	now := at.UnixMilli()
	index, size, _, _ := state.WindowSpan(window, at)
	for i := range plans {
		sls[i].mu.Lock()
	}
	unlock := func() {
		for i := len(plans) - 1; i >= 0; i-- {
			sls[i].mu.Unlock()
		}
	}
	for i := range plans {
		if !leased(&plans[i], sls[i], a, index) {
			// Leases that should hold this ask for a refill now.
			kick := false
			for j := range plans {
				sl := sls[j]
				kick = kick || sl.rpm.low(index) || sl.tpm.low(index) || sl.conc.low() || sl.budget != nil && sl.budget.low()
			}
			unlock()
			if kick {
				l.kick()
			}
			return nil
		}
	}
	adm := &Admission{q: l.q, scope: scope, at: at, leased: true}
	var h RateLimits
	kick := false
	for i := range plans {
		p, sl, d := &plans[i], sls[i], &adm.subj[i]
		d.n, d.sl = p.n, sl
		sl.inflight++
		lim := &p.s.Limits
		if a.Rate && lim.RequestsPerMinute > 0 {
			w := &sl.rpm
			w.avail--
			w.use.add(1, now)
			pickLeased(&h.Requests, w, index, size, now)
			kick = kick || w.low(index)
		}
		if a.Rate && lim.TokensPerMinute > 0 {
			w := &sl.tpm
			w.avail -= p.tokens
			w.use.add(p.tokens, now)
			d.tokens = p.tokens
			pickLeased(&h.Tokens, w, index, size, now)
			kick = kick || w.low(index)
		}
		if a.Rate && lim.Concurrent > 0 {
			sl.conc.inflight++
			sl.conc.busy(now)
			d.conc = true
			kick = kick || sl.conc.low()
		}
		if p.b != nil {
			b := sl.budget
			b.avail -= p.reserve
			b.inflight += p.reserve
			b.use.add(p.reserve, now)
			d.b, d.bl, d.reserved = p.b, b, p.reserve
			kick = kick || b.low()
		}
	}
	unlock()
	adm.headers = h
	if kick {
		l.kick()
	}
	return adm
}

// leased reports whether the leases sl hold what the plan p asks.
func leased(p *plan, sl *subjectLeases, a Ask, index int64) bool {
	lim := &p.s.Limits
	switch {
	case a.Rate && lim.RequestsPerMinute > 0 && !sl.rpm.has(lim.RequestsPerMinute, index, 1),
		a.Rate && lim.TokensPerMinute > 0 && !sl.tpm.has(lim.TokensPerMinute, index, p.tokens),
		a.Rate && lim.Concurrent > 0 && !sl.conc.has(lim.Concurrent):
		return false
	case p.b != nil:
		b := sl.budget
		return b != nil && b.spent == p.b.spent && b.avail >= p.reserve
	}
	return true
}

// pickLeased sets dst to what the headers tell of w's limit, if it has
// fewer left than dst: what the state said was left, and the slice; the
// count drains by the end of the next window.
func pickLeased(dst *RateLimit, w *windowLease, index, size, now int64) {
	r := RateLimit{Limit: w.limit, Remaining: min(max(w.remaining+w.avail, 0), w.limit),
		Reset: time.Duration((index+2)*size-now) * time.Millisecond}
	if dst.Limit == 0 || r.Remaining < dst.Remaining {
		*dst = r
	}
}

// noteExact tells the leases of a request admitted one by one what it
// used and what the state said, so that they learn the limits and the
// rate of use, and may be filled.
func (l *leaser) noteExact(plans []plan, a Ask, at time.Time, scope string, res []state.Result) {
	now := at.UnixMilli()
	index, _, _, _ := state.WindowSpan(window, at)
	kick := false
	for i := range plans {
		p := &plans[i]
		sl := l.subject(p.n, scope, true)
		sl.mu.Lock()
		lim := &p.s.Limits
		if p.rpm >= 0 {
			sl.rpm.note(lim.RequestsPerMinute, 1, res[p.rpm].Taken.Remaining, now)
			kick = kick || sl.rpm.low(index)
		}
		if p.tpm >= 0 {
			sl.tpm.note(lim.TokensPerMinute, p.tokens, res[p.tpm].Taken.Remaining, now)
			kick = kick || sl.tpm.low(index)
		}
		if p.conc >= 0 {
			c := &sl.conc
			if c.limit != lim.Concurrent {
				c.limit = lim.Concurrent
			}
			c.exact++
			c.busy(now)
			kick = kick || c.low()
		}
		if p.rs >= 0 {
			b := l.budgetLease(sl, p)
			b.seeded = true
			b.use.add(p.reserve, now)
			kick = kick || b.low()
		}
		sl.mu.Unlock()
	}
	if kick {
		l.kick()
	}
}

// note records a use of n counted one by one, with what the state said
// is left.
func (w *windowLease) note(limit, n, remaining, now int64) {
	if w.limit != limit {
		w.drop = w.drop || w.avail > 0
		w.limit = limit
	}
	w.remaining = remaining
	w.use.add(n, now)
}

// budgetLease returns the lease of the budget of p in sl (locked), made
// when missing; a lease of another period or amount is retired.
func (l *leaser) budgetLease(sl *subjectLeases, p *plan) *budgetLease {
	b := sl.budget
	if b != nil && b.spent == p.b.spent {
		return b
	}
	if b != nil {
		sl.retired = append(sl.retired, b)
	}
	b = &budgetLease{budget: p.s.Budget, spent: p.b.spent, base: p.b.leaseBase, end: p.b.end}
	sl.budget = b
	return b
}

// exactDone notes that a request admitted one by one is done.
func (l *leaser) exactDone(a *Admission) {
	for i := range a.subj {
		d := &a.subj[i]
		if !d.conc {
			continue
		}
		if sl := d.n.leases.Load(); sl != nil {
			sl.mu.Lock()
			sl.conc.exact = max(0, sl.conc.exact-1)
			sl.mu.Unlock()
		}
	}
}

// done settles a request admitted from leases: in them, and in the state
// by the background work.
func (l *leaser) done(ctx context.Context, a *Admission, actual Actual) error {
	if l.stopped.Load() {
		return l.doneStopped(ctx, a, actual)
	}
	index, size, _, _ := state.WindowSpan(window, a.at)
	live := l.q.now().UnixMilli() < (index+2)*size
	cost := settledCost(actual)
	for i := range a.subj {
		d := &a.subj[i]
		sl := d.sl
		if sl == nil {
			continue
		}
		sl.mu.Lock()
		sl.inflight--
		if d.tokens > 0 {
			w := &sl.tpm
			switch delta := max(actual.Tokens, 0) - d.tokens; {
			case delta < 0:
				w.giveBack(-delta, index, a.at)
			case delta > 0:
				// Used beyond the estimate: from the slice, which is
				// sized by what requests take from it, this too.
				take := int64(0)
				if w.index == index && !w.drop {
					take = max(0, min(delta, w.avail))
					w.avail -= take
					w.use.n += delta
				}
				if delta > take && live {
					w.correct(index, a.at, delta-take)
				}
			}
		}
		if b := d.bl; b != nil {
			// What the estimate held beyond the cost goes back to the
			// slice, up to the slice sought; the rest to the state.
			b.inflight -= d.reserved
			keep := max(b.want, 0)
			if b != sl.budget {
				keep = 0
			}
			b.avail = min(b.avail+d.reserved-cost, max(b.avail, keep))
			b.pending += cost
			if cost > d.reserved {
				b.use.n += cost - d.reserved
			}
		}
		if d.conc {
			sl.conc.inflight--
		}
		sl.mu.Unlock()
	}
	return nil
}

// settledCost is what a request spends from its budgets.
func settledCost(actual Actual) int64 {
	if !actual.Priced {
		return 0
	}
	return int64(max(actual.Cost, 0))
}

// doneStopped settles, after Stop, a request admitted from leases: in the
// state at once, as a request admitted one by one is.
func (l *leaser) doneStopped(ctx context.Context, a *Admission, actual Actual) error {
	var ops []state.Op
	index, size, _, _ := state.WindowSpan(window, a.at)
	live := l.q.now().UnixMilli() < (index+2)*size
	cost := settledCost(actual)
	for i := range a.subj {
		d := &a.subj[i]
		sl := d.sl
		if sl == nil {
			continue
		}
		sl.mu.Lock()
		sl.inflight--
		if delta := max(actual.Tokens, 0) - d.tokens; d.tokens > 0 && delta != 0 && live {
			ops = append(ops, state.Op{Kind: state.OpTake, Name: d.n.tpm, N: delta, Limit: -1, Window: window, At: a.at})
		}
		if b := d.bl; b != nil {
			b.inflight -= d.reserved
			ops = append(ops, state.Op{Kind: state.OpAdd, Name: b.base + strconv.FormatInt(b.bucket, 10), N: -d.reserved, IfExists: true})
			b.inState -= d.reserved
			if cost != 0 {
				ops = append(ops, state.Op{Kind: state.OpAdd, Name: b.spent, N: cost, IfExists: true})
			}
		}
		if d.conc {
			c := &sl.conc
			c.inflight--
			if c.held > 0 {
				c.held--
				ops = append(ops, state.Op{Kind: state.OpFreeSlots, Name: d.n.conc, Holder: l.holder, From: c.held, N: 1})
			}
		}
		sl.mu.Unlock()
	}
	if len(ops) == 0 {
		return nil
	}
	if ctx.Done() != nil {
		a.detached.Context = ctx
		ctx = &a.detached
	}
	_, err := l.q.st.Apply(ctx, a.scope, ops, make([]state.Result, len(ops)))
	return err
}

// Start starts the background work of leases. Calling it again, or
// without leasing, does nothing.
func (q *Quota) Start() {
	l := q.leases
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped.Load() {
		return
	}
	l.started = true
	go l.loop()
}

// Stop ends the background work of leases: it settles what is pending and
// gives back every unused slice, within ctx. Requests admitted from
// leases and done later settle in the state at once. It also ends the
// sending again of settlements whose answers were lost (resend.go),
// sending what it still holds once more within ctx.
func (q *Quota) Stop(ctx context.Context) error {
	q.resend.end(ctx, q)
	l := q.leases
	if l == nil {
		return nil
	}
	l.mu.Lock()
	started := l.started
	if l.stopped.Swap(true) {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	if started {
		close(l.stop)
		<-l.ended
	}
	// A scope with a batch in doubt sends it first, then what is left; a
	// batch that fails is sent again, a few times.
	var err error
	for try := 0; try < stopTries; try++ {
		var waiting bool
		if waiting, err = l.round(ctx, true); !waiting && err == nil {
			return nil
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(l.c.Interval):
			}
		}
	}
	return err
}

// stopTries bounds the rounds of Stop.
const stopTries = 5

// AdmitHeld admits a request from what this instance holds of its limits
// and budgets, asking the state nothing: for when the state is known to
// be unreachable. It returns nil when what it holds does not cover the
// request, or without leasing.
func (q *Quota) AdmitHeld(s Subjects, a Ask) *Admission {
	if q.leases == nil || s.Key.ID == "" || checkBudgets(&s) != nil {
		return nil
	}
	at := q.now()
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	plans := q.plans(sc, &s, a, at)
	return q.leases.admit(plans, a, at, plans[len(plans)-1].n.scope, false)
}

func (l *leaser) loop() {
	defer close(l.ended)
	t := time.NewTicker(l.c.Interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), fenceTTL/2)
		if _, err := l.round(ctx, false); err != nil {
			l.log.Debug("settling the leases of limits", zap.Error(err))
		}
		cancel()
	}
}
