package quota

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

// A shared state can take an Apply and lose only its answer: Redis ran the
// script, then the connection timed out or the request's context ended
// before the reply came. An admission counted so, which the caller takes
// as not admitted, would hold its budget reservation and its concurrency
// slot until they expire (Hold, and twice Hold); a settlement so would not
// be sent again, for fear of counting it twice, and its spend would be
// lost. So, on a shared state, an admission that reserves from a budget or
// takes a concurrency slot sets a mark with its other ops, in the same
// Apply, and its settlement deletes the mark with its own ops, applied
// only if the mark is there: a settlement sent again after one that was
// applied counts nothing. Then a settlement whose answer was lost is sent
// again until the state answers, and an admission whose answer was lost
// is undone (its reservations and slots given back, the mark deleted)
// once the state answers, if its mark is there: each exactly once. Only
// the marks of requests in flight are kept.
//
// A request admitted from leases is settled by the leases' batches, which
// their own fence counts once (lease_round.go).

// markTTL is how long the mark of an admission lives unsettled: longer
// than what it reserved (Hold to twice Hold). An Apply sent again for
// longer would find it gone.
func (q *Quota) markTTL() time.Duration { return 3 * q.hold }

// marked appends to ops the ops that apply them only while mark is there,
// and delete it.
func marked(ops []state.Op, mark string) []state.Op {
	return append(ops, state.Op{Kind: state.OpExists, Name: mark}, state.Op{Kind: state.OpDelete, Name: mark})
}

// markOf names the mark of an admission of plans, or returns "" when it
// needs none: on a state that loses no answer, or when the admission
// reserves from no budget and takes no slot (what it counts in its rate
// windows ends with them).
func (q *Quota) markOf(plans []plan) string {
	if !q.shared {
		return ""
	}
	for i := range plans {
		if plans[i].b != nil || plans[i].slot {
			var buf [48]byte
			b := append(append(buf[:0], "mark/"...), q.prefix...)
			return string(strconv.AppendUint(b, q.markSeq.Add(1), 36))
		}
	}
	return ""
}

// undoLater gives back, once the state answers again, what an admission
// of plans that failed may have counted there all the same: its budget
// reservations and its concurrency slots, if its mark was set and not yet
// settled.
func (q *Quota) undoLater(scope string, plans []plan, mark string) {
	if mark == "" {
		return
	}
	var ops []state.Op
	for i := range plans {
		p := &plans[i]
		if p.rs >= 0 {
			ops = append(ops, state.Op{Kind: state.OpAdd, Name: p.b.held, N: -p.reserve, IfExists: true})
		}
		if p.conc >= 0 {
			ops = append(ops, state.Op{Kind: state.OpReleaseSlot, Name: p.n.conc, Holder: p.holder})
		}
	}
	q.resend.add(q, resent{scope: scope, ops: marked(ops, mark), undo: true})
}

// resendLater sends ops, the settlement of a marked admission whose
// answer was lost (marked), again until the state answers.
func (q *Quota) resendLater(scope string, ops []state.Op) {
	own := make([]state.Op, len(ops))
	for i, op := range ops {
		op.Ref = nil // the caller's, and Redis reads none
		own[i] = op
	}
	q.resend.add(q, resent{scope: scope, ops: own})
}

// resent is an Apply sent again: a settlement, or the undoing of an
// admission.
type resent struct {
	scope string
	ops   []state.Op
	undo  bool
	since time.Time // first queued
	tries int
}

// resender sends again, in the background, the Applies whose answers were
// lost, until the state answers each: every interval, starting at
// resendFirst and doubling to resendMost, for as long as their marks
// live. One not answered by then is dropped, and logged.
type resender struct {
	stop chan struct{} // closed by Quota.Stop

	mu      sync.Mutex
	queue   []resent
	running bool
	stopped bool
}

const (
	resendFirst = 500 * time.Millisecond
	resendMost  = 15 * time.Second
	// resendTimeout bounds one Apply sent again.
	resendTimeout = 5 * time.Second
	// undoMissing is how often an undo that finds no mark is sent again:
	// the admission may still be on its way (its connection, which the
	// state reads before a new one, or not at all).
	undoMissing = 3
)

func (r *resender) add(q *Quota, x resent) {
	x.since = q.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		q.dropped(&x, "the quota was stopped")
		return
	}
	r.queue = append(r.queue, x)
	if !r.running {
		r.running = true
		go r.run(q)
	}
}

// run sends the queue again until it is empty, or Stop.
func (r *resender) run(q *Quota) {
	wait := resendFirst
	for {
		select {
		case <-time.After(wait):
		case <-r.stop:
			return
		}
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		r.mu.Unlock()
		var again []resent
		for _, x := range batch {
			if q.sendAgain(context.Background(), &x) {
				again = append(again, x)
			}
		}
		r.mu.Lock()
		if r.stopped {
			// Stop sent what was queued; these were being sent.
			r.running = false
			r.mu.Unlock()
			for _, x := range again {
				q.dropped(&x, "the quota was stopped")
			}
			return
		}
		r.queue = append(again, r.queue...)
		if len(r.queue) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		wait = min(2*wait, resendMost)
	}
}

// end stops the resender and sends what it still holds once more, within
// ctx; what the state does not answer then is dropped, and logged.
func (r *resender) end(ctx context.Context, q *Quota) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	left := r.queue
	r.queue = nil
	r.mu.Unlock()
	close(r.stop)
	for _, x := range left {
		if ctx.Err() == nil && !q.sendAgain(ctx, &x) {
			continue
		}
		q.dropped(&x, "the quota was stopped")
	}
}

// sendAgain sends x once more and reports whether to keep it.
func (q *Quota) sendAgain(ctx context.Context, x *resent) bool {
	if q.now().Sub(x.since) > q.markTTL() {
		q.dropped(x, "its mark has expired")
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, resendTimeout)
	defer cancel()
	res := make([]state.Result, len(x.ops))
	ok, err := q.st.Apply(ctx, x.scope, x.ops, res)
	if err != nil {
		return true
	}
	x.tries++
	// An undo that found no mark: the admission never counted, or has
	// not yet (its script waits on another connection). Asked again a
	// few times, then left. A settlement that found none was applied
	// before.
	return !ok && x.undo && x.tries < undoMissing
}

// dropped logs x, which is not sent again, and why.
func (q *Quota) dropped(x *resent, why string) {
	what := "a settlement"
	if x.undo {
		what = "the undoing of an admission"
	}
	q.log.Warn(what+" the shared state did not answer is dropped: "+why, zap.String("scope", x.scope))
}
