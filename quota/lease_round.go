package quota

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

// The background work of leases: a round visits every subject with
// leases, writes what goes to the state into one batch per scope —
// corrections, spend, slices given back or moved to a new lease bucket,
// renewals, refills — and sends the batches, every scope at once.

// leaseBatch is one Apply of a round in one scope. Its first op is the
// fence (state.OpAdvance) with its sequence number; every other op always
// fits, so a refused batch was applied before.
type leaseBatch struct {
	scope string
	seq   int64
	first time.Time // first sent
	ops   []state.Op
	then  []leaseCallback
}

// leaseCallback hands a refill what the state granted it: f runs under
// the subject's mutex, with the results when the batch was applied now,
// nil otherwise (failed, or applied before and its answer lost).
type leaseCallback struct {
	sl *subjectLeases
	f  func(res []state.Result)
}

func (b *leaseBatch) add(op state.Op) int {
	if len(b.ops) == 0 {
		b.ops = append(b.ops, state.Op{}) // the fence, set when sent
	}
	b.ops = append(b.ops, op)
	return len(b.ops) - 1
}

// sendParallel bounds the batches of one round in flight at once.
const sendParallel = 64

// round does one round of background work; final gives back every unused
// slice and asks for none (Stop). It reports whether subjects were left
// for the next round, their scope having a batch in doubt.
func (l *leaser) round(ctx context.Context, final bool) (waiting bool, err error) {
	now := l.q.now()
	l.mu.Lock()
	subjects := make([]*subjectLeases, 0, len(l.subjects))
	for sl := range l.subjects {
		subjects = append(subjects, sl)
	}
	batches := make(map[string]*leaseBatch, len(l.doubt))
	for scope, b := range l.doubt {
		batches[scope] = b
	}
	l.mu.Unlock()
	var quiet []*subjectLeases
	for _, sl := range subjects {
		sl.mu.Lock()
		b := batches[sl.scope]
		switch {
		case b == nil:
			b = &leaseBatch{scope: sl.scope}
			batches[sl.scope] = b
			l.build(sl, b, now, final)
		case b.seq == 0: // this round's
			l.build(sl, b, now, final)
		default:
			waiting = true
		}
		// A scope with a batch in doubt waits: what its subjects have
		// for the state stays in them until that batch is applied.
		if l.quiet(sl, now) {
			quiet = append(quiet, sl)
		}
		sl.mu.Unlock()
	}
	l.forget(quiet, now)
	return waiting, l.send(ctx, batches, now)
}

// build writes into b what sl (locked) has for the state.
func (l *leaser) build(sl *subjectLeases, b *leaseBatch, now time.Time, final bool) {
	n := sl.n
	l.buildWindow(sl, &sl.rpm, n.rpm, b, now, final)
	l.buildWindow(sl, &sl.tpm, n.tpm, b, now, final)
	l.buildSlots(sl, b, now, final)
	if sl.budget != nil {
		if !sl.budget.end.IsZero() && !now.Before(sl.budget.end) {
			sl.retired, sl.budget = append(sl.retired, sl.budget), nil
		} else {
			l.buildBudget(sl, sl.budget, b, now, final)
		}
	}
	retired := sl.retired[:0]
	for _, r := range sl.retired {
		l.buildBudget(sl, r, b, now, true)
		if !r.settled() {
			retired = append(retired, r)
		}
	}
	clear(sl.retired[len(retired):])
	sl.retired = retired
}

// buildWindow: what a slice of a rate window gives back (left of an
// older window, unused, or of a changed limit), the corrections of
// requests done, and a refill.
func (l *leaser) buildWindow(sl *subjectLeases, w *windowLease, name string, b *leaseBatch, now time.Time, final bool) {
	if w.limit == 0 && w.avail == 0 && len(w.corr) == 0 {
		return // a limit this subject does not have
	}
	ms := now.UnixMilli()
	index, size, _, _ := state.WindowSpan(window, now)
	w.kicked = false
	w.use.update(ms, l.c.Interval.Milliseconds())
	idle := ms-w.use.last >= l.c.Idle.Milliseconds()
	if w.avail > 0 && (w.index != index || w.drop || idle || final) {
		b.add(state.Op{Kind: state.OpTake, Name: name, N: -w.avail, Limit: -1, Window: window, At: time.UnixMilli(w.index * size)})
		w.avail = 0
	}
	if w.avail == 0 {
		w.index, w.drop = index, false
	}
	for _, c := range w.corr {
		if c.n != 0 && ms < (c.index+2)*size {
			b.add(state.Op{Kind: state.OpTake, Name: name, N: c.n, Limit: -1, Window: window, At: c.at})
		}
	}
	clear(w.corr)
	w.corr = w.corr[:0]
	w.want = 0
	if !final && !idle {
		w.want = w.use.slice(w.limit, &l.c)
	}
	if w.want == 0 || w.asking || w.index != index || w.avail >= (w.want+1)/2 {
		return
	}
	i := b.add(state.Op{Kind: state.OpTake, Name: name, N: w.want - w.avail, UpTo: true, Limit: w.limit, Window: window, At: now})
	w.asking = true
	b.then = append(b.then, leaseCallback{sl, func(res []state.Result) {
		w.asking = false
		if res == nil {
			return
		}
		g := res[i].Granted
		if w.index == index && !w.drop {
			w.avail += g
			w.remaining = res[i].Taken.Remaining
		} else if g > 0 {
			w.correct(index, now, -g)
		}
	}})
}

// buildSlots: renewals of the leased concurrency slots (every third of
// Life), refills, and the slots no longer sought freed.
func (l *leaser) buildSlots(sl *subjectLeases, b *leaseBatch, now time.Time, final bool) {
	c := &sl.conc
	if c.limit == 0 && c.held == 0 {
		return
	}
	ms := now.UnixMilli()
	c.kicked = false
	if ms-c.peakAt >= l.c.Interval.Milliseconds() || final {
		// The most in flight lately: a higher peak at once, a lower one
		// slowly.
		c.peakEst = max(c.peak, c.peakEst-c.peakEst/8)
		c.peak, c.peakAt = c.inflight+c.exact, ms
	}
	// The slots sought: the peak in flight and a quarter more (want),
	// of which no more than a slice unused.
	share := c.limit / l.c.Share
	c.want = 0
	if share >= 2 && !final && ms-c.last < l.c.Idle.Milliseconds() {
		c.want = min(share, max(1, c.peakEst/4))
	}
	target := min(max(c.peakEst, c.inflight)+c.want, c.inflight+share, state.MaxSlotRange)
	if c.want == 0 {
		target = c.inflight
	}
	renew := c.held > 0 && ms-c.renewed >= (l.c.Life/3).Milliseconds()
	if c.held > target && (c.held > target+c.want || c.want == 0) {
		b.add(state.Op{Kind: state.OpFreeSlots, Name: sl.n.conc, Holder: l.holder, From: target, N: c.held - target})
		c.held = target
	}
	from, n := c.held, int64(0)
	if !c.asking && c.want > 0 && c.held-c.inflight < (c.want+1)/2 {
		n = target - c.held
	}
	if renew {
		from, n = 0, c.held+n
	}
	if n <= 0 || c.asking {
		return
	}
	i := b.add(state.Op{Kind: state.OpLeaseSlots, Name: sl.n.conc, Holder: l.holder, From: from, N: n, Limit: c.limit, TTL: l.c.Life})
	c.asking = true
	b.then = append(b.then, leaseCallback{sl, func(res []state.Result) {
		c.asking = false
		if res == nil {
			return
		}
		// The holder holds from to from+Granted-1 now, and none after.
		c.held = from + res[i].Granted
		if from == 0 {
			c.renewed = ms
		}
	}})
}

// buildBudget: the spend of requests done, the state's count of what the
// instance holds brought to avail + inflight (moved to the current lease
// bucket), and, for the current budget, a refill. A retired lease
// (final) only settles.
func (l *leaser) buildBudget(sl *subjectLeases, bl *budgetLease, b *leaseBatch, now time.Time, final bool) {
	ms := now.UnixMilli()
	life := l.c.Life.Milliseconds()
	bl.kicked = false
	bl.use.update(ms, l.c.Interval.Milliseconds())
	idle := ms-bl.use.last >= l.c.Idle.Milliseconds()
	if bl.avail > 0 && (final || idle || !bl.seeded) {
		bl.avail = 0
	}
	if bl.avail < 0 && bl.inflight == 0 {
		// What answers cost beyond their estimates is spent, in full:
		// with nothing in flight the state counts it all.
		bl.avail = 0
	}
	if bl.pending != 0 {
		b.add(state.Op{Kind: state.OpAdd, Name: bl.spent, N: bl.pending, IfExists: true})
		bl.pending = 0
	}
	target := max(0, bl.avail+bl.inflight)
	lb := ms / life
	ttl := time.Duration((lb+2)*life-ms+1000) * time.Millisecond
	switch {
	case final && target != bl.inState:
		b.add(state.Op{Kind: state.OpAdd, Name: bl.base + strconv.FormatInt(bl.bucket, 10), N: target - bl.inState, IfExists: true})
		bl.inState = target
	case final:
	case bl.bucket != lb:
		if bl.inState != 0 {
			b.add(state.Op{Kind: state.OpAdd, Name: bl.base + strconv.FormatInt(bl.bucket, 10), N: -bl.inState, IfExists: true})
		}
		if target != 0 {
			b.add(state.Op{Kind: state.OpAdd, Name: bl.base + strconv.FormatInt(lb, 10), N: target, TTL: ttl})
		}
		bl.bucket, bl.inState = lb, target
	case target != bl.inState:
		b.add(state.Op{Kind: state.OpAdd, Name: bl.base + strconv.FormatInt(lb, 10), N: target - bl.inState, TTL: ttl})
		bl.inState = target
	}
	bl.want = 0
	if !final && !idle && bl.seeded {
		bl.want = bl.use.slice(int64(bl.budget.Amount), &l.c)
	}
	if !bl.low() {
		return
	}
	bn := sl.n.budgetAt(bl.budget, now, l.q.hold, l.c.Life)
	if bn.spent != bl.spent || bn.lbucket != lb {
		return
	}
	probe := b.add(state.Op{Kind: state.OpAdd, Name: bl.spent, IfExists: true})
	i := b.add(state.Op{Kind: state.OpReserve, Name: bn.lease, N: bl.want - bl.avail, UpTo: true, Limit: int64(bl.budget.Amount),
		With: bn.leaseWith, TTL: ttl})
	bl.asking = true
	b.then = append(b.then, leaseCallback{sl, func(res []state.Result) {
		bl.asking = false
		if res == nil {
			return
		}
		g := res[i].Granted
		bl.inState += g
		if res[probe].Missing {
			// The spend is not counted in the state (it lost it): the
			// slice was granted against nothing. It goes back, and a
			// request admitted one by one seeds the spend again.
			bl.seeded = false
			return
		}
		bl.avail += g
	}})
}

// quiet reports whether sl (locked) holds nothing, has nothing for the
// state, and has not been used for a while: the rounds may leave it.
func (l *leaser) quiet(sl *subjectLeases, now time.Time) bool {
	ms := now.UnixMilli()
	long := 10 * l.c.Idle.Milliseconds()
	w := func(w *windowLease) bool {
		return w.avail == 0 && len(w.corr) == 0 && !w.asking && ms-w.use.last >= long
	}
	c := &sl.conc
	return sl.inflight == 0 && w(&sl.rpm) && w(&sl.tpm) && c.held == 0 && c.exact == 0 && !c.asking && ms-c.last >= long &&
		(sl.budget == nil || sl.budget.settled() && !sl.budget.asking && ms-sl.budget.use.last >= long) && len(sl.retired) == 0
}

// forget takes the quiet subjects out of the rounds, unless they were
// used meanwhile.
func (l *leaser) forget(quiet []*subjectLeases, now time.Time) {
	if len(quiet) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sl := range quiet {
		sl.mu.Lock()
		if l.quiet(sl, now) {
			delete(l.subjects, sl)
			sl.active.Store(false)
		}
		sl.mu.Unlock()
	}
}

// send sends the batches, every scope at once, and hands the refills
// what they were granted. A batch that failed without an answer is kept
// to be sent again, as it is, before anything newer of its scope.
func (l *leaser) send(ctx context.Context, batches map[string]*leaseBatch, now time.Time) error {
	type sent struct {
		b   *leaseBatch
		ok  bool
		res []state.Result
		err error
	}
	out := make([]sent, 0, len(batches))
	for _, b := range batches {
		if len(b.ops) == 0 {
			continue
		}
		if b.seq == 0 {
			b.seq, b.first = l.seq.Add(1), now
			b.ops[0] = state.Op{Kind: state.OpAdvance, Name: l.fence, N: b.seq, TTL: fenceTTL}
		}
		out = append(out, sent{b: b, res: make([]state.Result, len(b.ops))})
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, sendParallel)
	for i := range out {
		s := &out[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.ok, s.err = l.q.st.Apply(ctx, s.b.scope, s.b.ops, s.res)
		})
	}
	wg.Wait()
	var errs []error
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range out {
		s := &out[i]
		b := s.b
		res := s.res
		switch {
		case s.err == nil:
			delete(l.doubt, b.scope)
			if !s.ok {
				res = nil // the fence refused: applied before
			}
		case now.Sub(b.first) < fenceTTL/2 && (errors.Is(s.err, state.ErrUnavailable) || ctx.Err() != nil):
			l.doubt[b.scope] = b
			errs = append(errs, s.err)
			continue
		default:
			delete(l.doubt, b.scope)
			l.log.Error("leases of limits: settlements dropped, not counted in the shared state", zap.String("scope", b.scope),
				zap.Int("ops", len(b.ops)-1), zap.Error(s.err))
			errs = append(errs, s.err)
			res = nil
		}
		for _, cb := range b.then {
			cb.sl.mu.Lock()
			cb.f(res)
			cb.sl.mu.Unlock()
		}
		b.then = nil
	}
	return errors.Join(errs...)
}
