package state

import (
	"context"
	"time"
)

// Apply implements Atomic. Under the one lock of Local it applies the ops
// in order, writing down what each changed, and puts everything back when
// one of them refused.
func (l *Local) Apply(_ context.Context, scope string, ops []Op, results []Result) (bool, error) {
	if err := CheckOps(scope, ops, results); err != nil {
		return false, err
	}
	now, err := l.lock()
	if err != nil {
		return false, err
	}
	defer l.mu.Unlock()
	var buf [16]localUndo
	undo := buf[:0]
	ok := true
	for i := range ops {
		var r Result
		r, undo = l.applyOp(scope, &ops[i], now, undo)
		results[i] = r
		ok = ok && r.OK
	}
	if !ok {
		for i := len(undo) - 1; i >= 0; i-- {
			l.undo(&undo[i])
		}
	}
	return ok, nil
}

// localUndo is what one op changed: the counter, window or slot holder as
// it was before.
type localUndo struct {
	kind    uint8 // undoCounter, undoWindow, undoSlot
	counter scopedKey
	window  windowID
	holder  string
	had     bool
	prev    localCounter // a counter's or window's value and expiry
	prevExp time.Time    // a slot holder's expiry
}

const (
	undoCounter = iota
	undoWindow
	undoSlot
)

func (l *Local) undo(u *localUndo) {
	switch u.kind {
	case undoCounter:
		if !u.had {
			delete(l.counters, u.counter)
		} else {
			c := u.prev
			l.counters[u.counter] = &c
		}
	case undoWindow:
		if !u.had {
			delete(l.windows, u.window)
		} else {
			c := u.prev
			l.windows[u.window] = &c
		}
	case undoSlot:
		set := l.slots[u.counter]
		switch {
		case u.had:
			if set == nil {
				set = newSlotSet()
				l.slots[u.counter] = set
			}
			set.put(u.holder, u.prevExp)
		case set != nil:
			delete(set.holders, u.holder)
			if len(set.holders) == 0 {
				delete(l.slots, u.counter)
			}
		}
	}
}

// saveCounter writes down the counter k as it is (c, nil when missing)
// before an op changes it.
func saveCounter(undo []localUndo, k scopedKey, c *localCounter) []localUndo {
	u := localUndo{kind: undoCounter, counter: k, had: c != nil}
	if c != nil {
		u.prev = *c
	}
	return append(undo, u)
}

func (l *Local) value(k scopedKey, now time.Time) int64 {
	if c := l.counter(k, now); c != nil {
		return c.value
	}
	return 0
}

func (l *Local) applyOp(scope string, op *Op, now time.Time, undo []localUndo) (Result, []localUndo) {
	k := scopedKey{scope, op.Name}
	r := Result{OK: true}
	switch op.Kind {
	case OpAdd, OpInit, OpExists, OpGet, OpReserve:
		c := l.counter(k, now)
		switch op.Kind {
		case OpAdd:
			if c == nil && op.IfExists {
				r.Missing = true
				break
			}
			undo = saveCounter(undo, k, c)
			c = l.addTo(c, k, op.N, op.TTL, now)
		case OpInit:
			if c == nil {
				undo = saveCounter(undo, k, c)
				c = l.addTo(c, k, op.N, op.TTL, now)
				r.Missing = true
			}
		case OpExists:
			r.OK, r.Missing = c != nil, c == nil
		case OpGet, OpReserve:
			var total int64
			if c != nil {
				total = c.value
			}
			for _, w := range op.With {
				total += l.value(scopedKey{scope, w}, now)
			}
			if op.Kind == OpReserve {
				r.OK = total+op.N <= op.Limit
				if r.OK {
					undo = saveCounter(undo, k, c)
					c = l.addTo(c, k, op.N, op.TTL, now)
					total += op.N
				}
			}
			r.Total = total
		}
		if c != nil {
			r.Value = c.value
		}
	case OpTake:
		index, size, elapsed, _ := WindowSpan(op.Window, op.At)
		curID := windowID{scope, op.Name, op.Window.Sliding, size, index}
		get := func(id windowID) *localCounter {
			c := l.windows[id]
			if c == nil || c.expired(now) {
				return nil
			}
			return c
		}
		curC := get(curID)
		var cur, prev int64
		if curC != nil {
			cur = curC.value
		}
		if op.Window.Sliding {
			if p := get(windowID{scope, op.Name, true, size, index - 1}); p != nil {
				prev = p.value
			}
		}
		r.OK = Fits(op.Window, cur, prev, op.N, op.Limit, size, elapsed)
		if r.OK && op.N != 0 {
			u := localUndo{kind: undoWindow, window: curID, had: curC != nil}
			if curC != nil {
				u.prev = *curC
			} else {
				curC = &localCounter{}
				l.windows[curID] = curC
			}
			undo = append(undo, u)
			cur += op.N
			curC.value = cur
			curC.expires = now.Add(time.Duration(WindowTTL(op.Window, size, elapsed)) * time.Millisecond)
		}
		r.Taken = NewTaken(op.Window, r.OK, cur, prev, op.N, op.Limit, op.At)
	case OpAcquireSlot, OpReleaseSlot:
		set := l.slots[k]
		set.expire(now)
		exp, has := set.get(op.Holder)
		if op.Kind == OpAcquireSlot {
			r.OK = has || set.len() < op.Limit
			if r.OK {
				undo = append(undo, localUndo{kind: undoSlot, counter: k, holder: op.Holder, had: has, prevExp: exp})
				if set == nil {
					set = newSlotSet()
					l.slots[k] = set
				}
				set.put(op.Holder, now.Add(op.TTL))
			}
		} else if has {
			undo = append(undo, localUndo{kind: undoSlot, counter: k, holder: op.Holder, had: true, prevExp: exp})
			delete(set.holders, op.Holder)
		}
		// An emptied set is kept for the next request (the sweep drops
		// it if none comes).
		r.Slots = set.len()
	}
	return r, undo
}

var _ Atomic = (*Local)(nil)
