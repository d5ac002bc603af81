package state

import (
	"context"
	"testing"
	"time"
)

// An entry the sweep dropped is not found through the Refs and the With
// lists that held it: the name's new entry is.
func TestLocalRefAfterSweep(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLocal(func() time.Time { return now })
	ref, heldRef := new(Ref), new(Ref)
	apply := func(ops ...Op) []Result {
		t.Helper()
		res := make([]Result, len(ops))
		if _, err := l.Apply(ctx, "s", ops, res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	apply(Op{Kind: OpAdd, Name: "x", N: 1, TTL: time.Second, Ref: ref},
		Op{Kind: OpAdd, Name: "held", N: 1, Ref: heldRef})
	if r := apply(Op{Kind: OpGet, Name: "held", With: []string{"x"}, Ref: heldRef}); r[0].Total != 2 {
		t.Fatalf("held with x: %d, want 2", r[0].Total)
	}
	dropped := ref.e.Load()
	now = now.Add(2 * time.Second)
	l.mu.Lock()
	l.sweep(instantOf(now))
	l.mu.Unlock()
	if dropped.live || l.entries[scopedKey{"s", "x"}] != nil {
		t.Fatal("the sweep kept an entry with nothing live")
	}
	apply(Op{Kind: OpAdd, Name: "x", N: 5}) // a new entry, through no Ref
	if r := apply(Op{Kind: OpExists, Name: "x", Ref: ref}); r[0].Value != 5 || ref.e.Load() == dropped {
		t.Fatalf("x through a Ref of the dropped entry: %+v", r[0])
	}
	if r := apply(Op{Kind: OpGet, Name: "held", With: []string{"x"}, Ref: heldRef}); r[0].Total != 6 {
		t.Fatalf("held with x after the sweep: %d, want 6", r[0].Total)
	}
	// A With name read while missing, then made, is read made.
	if r := apply(Op{Kind: OpGet, Name: "held", With: []string{"x", "later"}, Ref: heldRef}); r[0].Total != 6 {
		t.Fatalf("held with x and a missing name: %d, want 6", r[0].Total)
	}
	apply(Op{Kind: OpAdd, Name: "later", N: 4})
	if r := apply(Op{Kind: OpGet, Name: "held", With: []string{"x", "later"}, Ref: heldRef}); r[0].Total != 10 {
		t.Fatalf("held with x and later: %d, want 10", r[0].Total)
	}
	if r := apply(Op{Kind: OpExists, Name: "never", With: []string{"x"}}); !r[0].Missing {
		t.Fatalf("a name only read exists: %+v", r[0])
	}
	// A Ref used on another Local finds that one's entries.
	other := newLocal(func() time.Time { return now })
	res := make([]Result, 1)
	if _, err := other.Apply(ctx, "s", []Op{{Kind: OpAdd, Name: "x", N: 7, Ref: ref}}, res); err != nil || res[0].Value != 7 {
		t.Fatalf("another Local through the same Ref: %+v %v", res[0], err)
	}
	if r := apply(Op{Kind: OpExists, Name: "x", Ref: ref}); r[0].Value != 5 {
		t.Fatalf("x back on the first Local: %+v", r[0])
	}
}

// A refused Apply puts back the windows, counters and slots it made or
// changed, in entries it made and in those that were there, and an
// expired window's place serves the next one.
func TestLocalUndoEntries(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLocal(func() time.Time { return now })
	w := Window{Size: time.Minute, Sliding: true}
	ops := func(at time.Time, limit int64) []Op {
		return []Op{
			{Kind: OpTake, Name: "rpm", N: 1, Limit: 100, Window: w, At: at},
			{Kind: OpTake, Name: "fresh", N: 1, Limit: 100, Window: w, At: at},
			{Kind: OpAdd, Name: "rpm", N: 3},
			{Kind: OpAcquireSlot, Name: "rpm", Holder: "h", Limit: 1, TTL: time.Minute},
			{Kind: OpReserve, Name: "budget", N: 1, Limit: limit},
		}
	}
	res := make([]Result, 5)
	if ok, err := l.Apply(ctx, "s", ops(now, 10), res); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before := *l.entries[scopedKey{"s", "rpm"}]
	beforeWindows := append([]localWindow(nil), before.windows...)
	if ok, err := l.Apply(ctx, "s", append(ops(now, 0), Op{Kind: OpTake, Name: "other", N: 1, Limit: 5, Window: w, At: now}), make([]Result, 6)); ok || err != nil {
		t.Fatal("applied over the budget", err)
	}
	after := l.entries[scopedKey{"s", "rpm"}]
	if after.counter != before.counter || after.hasCounter != before.hasCounter || len(after.slots.holders) != 1 {
		t.Fatalf("counter or slots changed by a refused Apply: %+v, was %+v", after, before)
	}
	for i, win := range after.windows {
		if win != beforeWindows[i] {
			t.Fatalf("window %d changed by a refused Apply: %+v, was %+v", i, win, beforeWindows[i])
		}
	}
	if e := l.entries[scopedKey{"s", "other"}]; e != nil && len(e.windows) > 0 && e.windows[0].live(instantOf(now)) {
		t.Fatalf("a refused Apply left a window: %+v", e.windows)
	}
	// Three minutes on, the window of the first Take expired: the next
	// one takes its place.
	now = now.Add(3 * time.Minute)
	n := len(after.windows)
	if ok, err := l.Apply(ctx, "s", ops(now, 10)[:1], res); !ok || err != nil || res[0].Taken.Count != 1 {
		t.Fatal(ok, err, res[0].Taken)
	}
	if len(after.windows) != n {
		t.Fatalf("%d windows, was %d: the expired one's place was not reused", len(after.windows), n)
	}
}
