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
	undo := l.undo[:0]
	ok := true
	for i := range ops {
		undo = l.applyOp(scope, &ops[i], now, &results[i], undo)
		ok = ok && results[i].OK
	}
	if !ok {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i].undo()
		}
	}
	l.undo = undo
	return ok, nil
}

// localUndo is what one op changed: the counter, a window or a slot
// holder of an entry as it was before.
type localUndo struct {
	e      *localEntry
	kind   uint8 // undoCounter, undoWindow, undoSlot
	had    bool
	window int // the index of the window in e.windows
	holder string
	prev   localCounter // the counter's or the window's value and expiry; a slot holder's expiry
}

const (
	undoCounter = iota
	undoWindow
	undoSlot
)

func (u *localUndo) undo() {
	e := u.e
	switch u.kind {
	case undoCounter:
		e.hasCounter, e.counter = u.had, u.prev
	case undoWindow:
		if u.had {
			e.windows[u.window].localCounter = u.prev
		} else {
			e.windows[u.window] = localWindow{} // unused: no expiry
		}
	case undoSlot:
		if u.had {
			e.slots.put(u.holder, u.prev.expires)
		} else {
			delete(e.slots.holders, u.holder)
		}
	}
}

// saveCounter writes down e's counter as it is (c, nil when missing)
// before an op changes it.
func saveCounter(undo []localUndo, e *localEntry, c *localCounter) []localUndo {
	u := localUndo{e: e, kind: undoCounter, had: c != nil}
	if c != nil {
		u.prev = *c
	}
	return append(undo, u)
}

// applyOp applies op, writing what it found into r, and returns undo with
// what it changed.
func (l *Local) applyOp(scope string, op *Op, now instant, r *Result, undo []localUndo) []localUndo {
	e := l.entry(scope, op.Name, op.Ref)
	*r = Result{OK: true}
	switch op.Kind {
	case OpAdd, OpInit, OpExists, OpGet, OpReserve, OpAdvance, OpDelete:
		c := e.liveCounter(now)
		add := func(n int64) {
			if e == nil {
				e = l.newEntry(scope, op.Name, op.Ref)
			}
			undo = saveCounter(undo, e, c)
			c = e.add(n, op.TTL, now)
		}
		switch op.Kind {
		case OpAdd:
			if c == nil && op.IfExists {
				r.Missing = true
				break
			}
			add(op.N)
		case OpInit:
			if c == nil {
				add(op.N)
				r.Missing = true
			}
		case OpExists:
			r.OK, r.Missing = c != nil, c == nil
		case OpGet, OpReserve:
			var total int64
			if c != nil {
				total = c.value
			}
			for j, w := range op.With {
				total += l.withEntry(e, j, scope, w).value(now)
			}
			if op.Kind == OpReserve {
				n := op.N
				if op.UpTo {
					n = max(0, min(op.N, op.Limit-total))
					r.OK, r.Granted = n >= op.Min, n
				} else {
					r.OK = total+n <= op.Limit
				}
				if r.OK && (n != 0 || !op.UpTo) {
					add(n)
					total += n
				}
			}
			r.Total = total
		case OpDelete:
			r.Missing = c == nil
			if c != nil {
				r.Value = c.value
				undo = saveCounter(undo, e, c)
				e.hasCounter, e.counter = false, localCounter{}
			}
			return undo
		case OpAdvance:
			if c != nil && c.value >= op.N {
				r.OK = false
				break
			}
			r.Missing = c == nil
			if c != nil {
				r.Value = c.value
			}
			if e == nil {
				e = l.newEntry(scope, op.Name, op.Ref)
			}
			undo = saveCounter(undo, e, c)
			e.hasCounter, e.counter = true, localCounter{value: op.N}
			if op.TTL > 0 {
				e.counter.expires = now.after(op.TTL)
			}
			return undo
		}
		if c != nil {
			r.Value = c.value
		}
	case OpTake:
		index, size, elapsed, _ := WindowSpan(op.Window, op.At)
		least := int64(-1) // not UpTo
		if op.UpTo {
			least = op.Min
		}
		r.Taken, r.Granted, undo = l.take(e, scope, op.Name, op.Ref, op.N, least, op.Limit, op.Window, index, size, elapsed, now, undo)
		r.OK = r.Taken.OK
	case OpLeaseSlots, OpFreeSlots:
		if e == nil {
			e = l.newEntry(scope, op.Name, op.Ref)
		}
		undo = l.leaseSlots(e, op, now, r, undo)
	case OpAcquireSlot, OpReleaseSlot:
		var set *slotSet
		if e != nil {
			set = &e.slots
		}
		set.expire(now)
		exp, has := set.get(op.Holder)
		if op.Kind == OpAcquireSlot {
			r.OK = has || set.len() < op.Limit
			if r.OK {
				if e == nil {
					e = l.newEntry(scope, op.Name, op.Ref)
					set = &e.slots
				}
				undo = append(undo, localUndo{e: e, kind: undoSlot, holder: op.Holder, had: has, prev: localCounter{expires: exp}})
				set.put(op.Holder, now.after(op.TTL))
			}
		} else if has {
			undo = append(undo, localUndo{e: e, kind: undoSlot, holder: op.Holder, had: true, prev: localCounter{expires: exp}})
			delete(set.holders, op.Holder)
		}
		// An emptied set is kept for the next request (the sweep drops
		// it if none comes).
		r.Slots = set.len()
	}
	return undo
}

// leaseSlots applies OpLeaseSlots or OpFreeSlots op to the slots of e.
func (l *Local) leaseSlots(e *localEntry, op *Op, now instant, r *Result, undo []localUndo) []localUndo {
	set := &e.slots
	set.expire(now)
	holding := op.Kind == OpLeaseSlots
	for i := op.From; i < op.From+op.N; i++ {
		h := SlotName(op.Holder, i)
		exp, has := set.get(h)
		if holding && (has || set.len() < op.Limit) {
			undo = append(undo, localUndo{e: e, kind: undoSlot, holder: h, had: has, prev: localCounter{expires: exp}})
			set.put(h, now.after(op.TTL))
			r.Granted++
			continue
		}
		holding = false // the rest of the range is freed
		if has {
			undo = append(undo, localUndo{e: e, kind: undoSlot, holder: h, had: true, prev: localCounter{expires: exp}})
			delete(set.holders, h)
		}
	}
	r.OK = op.Kind == OpFreeSlots || r.Granted >= op.Min
	r.Slots = set.len()
	return undo
}

// take counts n against limit in the window w of e, the entry of (scope,
// name) or nil when it has none, at the time whose span WindowSpan gave,
// as Counters.Take and OpTake do, and appends what it changed to undo.
// With least >= 0 it counts as much of n as fits, at least least (an
// UpTo take), and returns what it counted. The window's expiry counts from the
// real now, as on Redis.
func (l *Local) take(e *localEntry, scope, name string, ref *Ref, n, least, limit int64, w Window,
	index, size, elapsed int64, now instant, undo []localUndo) (Taken, int64, []localUndo) {
	i := e.window(w.Sliding, size, index, now)
	var cur, prev int64
	if i >= 0 {
		cur = e.windows[i].value
	}
	if w.Sliding {
		prev = e.windowValue(true, size, index-1, now)
	}
	var ok bool
	granted := int64(0)
	if least >= 0 {
		if granted, ok = Grant(w, cur, prev, n, least, limit, size, elapsed); ok {
			n = granted
		} else {
			n = least // what a refusal tells about
		}
	} else {
		ok = Fits(w, cur, prev, n, limit, size, elapsed)
	}
	if ok && n != 0 {
		if e == nil {
			e = l.newEntry(scope, name, ref)
		}
		if i >= 0 {
			undo = append(undo, localUndo{e: e, kind: undoWindow, had: true, window: i, prev: e.windows[i].localCounter})
		} else {
			i = e.newWindow(w.Sliding, size, index, now)
			undo = append(undo, localUndo{e: e, kind: undoWindow, window: i})
		}
		cur += n
		win := &e.windows[i]
		win.value = cur
		win.expires = now.after(time.Duration(WindowTTL(w, size, elapsed)) * time.Millisecond)
	}
	return newTaken(w, ok, cur, prev, n, limit, index, size, elapsed), granted, undo
}

var _ Atomic = (*Local)(nil)
