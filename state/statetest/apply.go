package statetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
)

// apply runs Apply and returns whether it applied and the results.
func apply(t *testing.T, s state.State, scope string, ops ...state.Op) (bool, []state.Result) {
	t.Helper()
	res := make([]state.Result, len(ops))
	ok, err := s.Apply(ctxT(t), scope, ops, res)
	if err != nil {
		t.Fatal(err)
	}
	return ok, res
}

// get reads the counter name of scope through Apply.
func get(t *testing.T, s state.State, scope, name string) (int64, bool) {
	t.Helper()
	_, res := apply(t, s, scope, state.Op{Kind: state.OpExists, Name: name})
	return res[0].Value, !res[0].Missing
}

func testApplyAllOrNothing(t *testing.T, open Instances) {
	ss := open(t, 2)
	a, b := ss[0], ss[1]
	w := state.Window{Size: time.Minute, Sliding: true}
	at := base.Add(10 * time.Second)
	ops := []state.Op{
		{Kind: state.OpReserve, Name: "key-budget", N: 5, Limit: 100, TTL: time.Minute},
		{Kind: state.OpTake, Name: "key-rpm", N: 1, Limit: 10, Window: w, At: at},
		{Kind: state.OpAcquireSlot, Name: "key-conc", Holder: "req-1", Limit: 1, TTL: time.Minute},
		{Kind: state.OpAdd, Name: "seen", N: 1, TTL: time.Minute},
		{Kind: state.OpReserve, Name: "owner-budget", N: 5, Limit: 4, TTL: time.Minute}, // refuses
	}
	ok, res := apply(t, a, "tenant", ops...)
	if ok {
		t.Fatal("an Apply with an op over its limit was applied")
	}
	for i, want := range []bool{true, true, true, true, false} {
		if res[i].OK != want {
			t.Fatalf("op %d (%v): OK %v, want %v", i, ops[i].Kind, res[i].OK, want)
		}
	}
	// Results describe the ops as if applied; the refused one as it is.
	if res[0].Value != 5 || res[0].Total != 5 || res[1].Taken.Count != 1 || res[2].Slots != 1 || res[4].Total != 0 {
		t.Fatalf("results %+v", res)
	}
	// Nothing was applied, on any instance.
	for _, name := range []string{"key-budget", "seen", "owner-budget"} {
		if v, exists := get(t, b, "tenant", name); exists {
			t.Fatalf("refused Apply left counter %s = %d", name, v)
		}
	}
	if _, r := apply(t, b, "tenant", state.Op{Kind: state.OpTake, Name: "key-rpm", N: 0, Limit: 10, Window: w, At: at}); r[0].Taken.Count != 0 {
		t.Fatalf("refused Apply counted in the window: %+v", r[0].Taken)
	}
	if _, r := apply(t, b, "tenant", state.Op{Kind: state.OpAcquireSlot, Name: "key-conc", Holder: "other", Limit: 1, TTL: time.Minute}); !r[0].OK {
		t.Fatal("refused Apply kept a slot")
	}
	apply(t, b, "tenant", state.Op{Kind: state.OpReleaseSlot, Name: "key-conc", Holder: "other"})

	// With room for the last op, everything is applied.
	ops[4].Limit = 5
	ok, res = apply(t, b, "tenant", ops...)
	if !ok {
		t.Fatalf("Apply within every limit refused: %+v", res)
	}
	if v, _ := get(t, a, "tenant", "key-budget"); v != 5 {
		t.Fatalf("key-budget = %d, want 5", v)
	}
	if v, _ := get(t, a, "tenant", "owner-budget"); v != 5 {
		t.Fatalf("owner-budget = %d, want 5", v)
	}
	if res[1].Taken.Count != 1 || res[1].Taken.Remaining != 9 || !res[1].Taken.OK {
		t.Fatalf("take result %+v", res[1].Taken)
	}
	// The slot is held now: another holder is refused, the Apply too.
	ops[2].Holder = "req-2"
	ops[4].Limit = 1 << 40
	if ok, res = apply(t, a, "tenant", ops...); ok || res[2].OK || res[2].Slots != 1 {
		t.Fatalf("a second holder of a 1-slot set: %v %+v", ok, res[2])
	}
	if v, _ := get(t, a, "tenant", "key-budget"); v != 5 {
		t.Fatalf("the refused Apply reserved: key-budget = %d", v)
	}
}

func testApplyOrderAndSeeding(t *testing.T, open Instances) {
	ss := open(t, 2)
	a, b := ss[0], ss[1]
	// A missing counter refuses OpExists, which refuses the Apply.
	ok, res := apply(t, a, "s", state.Op{Kind: state.OpExists, Name: "spent"},
		state.Op{Kind: state.OpReserve, Name: "held", N: 3, Limit: 10, With: []string{"spent"}, TTL: time.Minute})
	if ok || !res[0].Missing || res[0].OK || !res[1].OK {
		t.Fatalf("OpExists of a missing counter: %v %+v", ok, res)
	}
	// Init then Reserve: the reserve sees the initialised value.
	ok, res = apply(t, a, "s", state.Op{Kind: state.OpInit, Name: "spent", N: 6, TTL: time.Minute},
		state.Op{Kind: state.OpReserve, Name: "held", N: 3, Limit: 10, With: []string{"spent"}, TTL: time.Minute})
	if !ok || !res[0].Missing || res[0].Value != 6 || res[1].Value != 3 || res[1].Total != 9 {
		t.Fatalf("Init then Reserve: %v %+v", ok, res)
	}
	// A second Init (another instance seeding at the same time) changes
	// nothing: no double seeding.
	ok, res = apply(t, b, "s", state.Op{Kind: state.OpInit, Name: "spent", N: 6, TTL: time.Minute},
		state.Op{Kind: state.OpReserve, Name: "held", N: 2, Limit: 10, With: []string{"spent"}, TTL: time.Minute})
	if ok || res[0].Missing || res[0].Value != 6 || res[1].OK || res[1].Total != 9 {
		t.Fatalf("second Init: %v %+v", ok, res)
	}
	// Settle: the reservation is released, the cost added.
	ok, res = apply(t, b, "s", state.Op{Kind: state.OpAdd, Name: "held", N: -3, IfExists: true},
		state.Op{Kind: state.OpAdd, Name: "spent", N: 4, IfExists: true},
		state.Op{Kind: state.OpGet, Name: "spent", With: []string{"held"}})
	if !ok || res[0].Value != 0 || res[1].Value != 10 || res[2].Total != 10 || res[2].Value != 10 {
		t.Fatalf("settle: %v %+v", ok, res)
	}
	// IfExists adds nothing to a missing counter, and creates nothing.
	ok, res = apply(t, a, "s", state.Op{Kind: state.OpAdd, Name: "gone", N: 7, IfExists: true})
	if !ok || !res[0].Missing || res[0].Value != 0 {
		t.Fatalf("Add IfExists on a missing counter: %v %+v", ok, res)
	}
	if _, exists := get(t, a, "s", "gone"); exists {
		t.Fatal("Add IfExists created a counter")
	}
	// Without IfExists it creates it, with its TTL; an existing counter
	// keeps its expiry.
	_, res = apply(t, a, "s", state.Op{Kind: state.OpAdd, Name: "new", N: -2, TTL: 300 * time.Millisecond},
		state.Op{Kind: state.OpAdd, Name: "new", N: 5, TTL: time.Hour},
		state.Op{Kind: state.OpInit, Name: "init", N: 4, TTL: 300 * time.Millisecond},
		state.Op{Kind: state.OpReserve, Name: "fresh", N: 1, Limit: 10, TTL: 300 * time.Millisecond})
	if res[0].Value != -2 || res[1].Value != 3 {
		t.Fatalf("Add creating a counter: %+v", res)
	}
	apply(t, a, "s", state.Op{Kind: state.OpAdd, Name: "new", N: 1, TTL: time.Hour},
		state.Op{Kind: state.OpReserve, Name: "fresh", N: 1, Limit: 10, TTL: time.Hour})
	time.Sleep(450 * time.Millisecond)
	for _, name := range []string{"new", "init", "fresh"} {
		if v, exists := get(t, b, "s", name); exists {
			t.Fatalf("counter %s = %d outlived its TTL", name, v)
		}
	}
}

func testApplyScopes(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	must(s.Add(ctx, "n", 100, 0))(t)
	apply(t, s, "one", state.Op{Kind: state.OpAdd, Name: "n", N: 1})
	apply(t, s, "two", state.Op{Kind: state.OpAdd, Name: "n", N: 2})
	apply(t, s, "{brace}", state.Op{Kind: state.OpAdd, Name: "n", N: 3})
	apply(t, s, "x}y{", state.Op{Kind: state.OpAdd, Name: "n", N: 4},
		state.Op{Kind: state.OpAdd, Name: "m", N: 5}) // two keys of an odd scope in one script
	for scope, want := range map[string]int64{"one": 1, "two": 2, "{brace}": 3, "x}y{": 4} {
		if v, _ := get(t, s, scope, "n"); v != want {
			t.Fatalf("scope %q: n = %d, want %d", scope, v, want)
		}
	}
	if c := must(s.Get(ctx, "n"))(t); c.Value != 100 {
		t.Fatalf("Apply changed the counter of Add: %+v", c)
	}
	// Slots and windows of a scope are apart from those of the methods.
	if _, ok, _ := s.AcquireSlot(ctx, "conc", "a", 1, time.Minute); !ok {
		t.Fatal("slot")
	}
	if _, r := apply(t, s, "one", state.Op{Kind: state.OpAcquireSlot, Name: "conc", Holder: "b", Limit: 1, TTL: time.Minute}); !r[0].OK {
		t.Fatal("the slot set of a scope is shared with the methods'")
	}
	// Bad arguments.
	res := make([]state.Result, 1)
	for _, tc := range []struct {
		scope string
		ops   []state.Op
		res   []state.Result
	}{
		{"", []state.Op{{Kind: state.OpAdd, Name: "n"}}, res},
		{"s", []state.Op{{Kind: state.OpAdd, Name: ""}}, res},
		{"s", []state.Op{{Kind: 99, Name: "n"}}, res},
		{"s", []state.Op{{Kind: state.OpAcquireSlot, Name: "n", Limit: 1}}, res},
		{"s", []state.Op{{Kind: state.OpTake, Name: "n", N: 1}}, res},
		{"s", []state.Op{{Kind: state.OpAdd, Name: "n"}, {Kind: state.OpAdd, Name: "m"}}, res},
	} {
		if _, err := s.Apply(ctx, tc.scope, tc.ops, tc.res); !errors.Is(err, state.ErrBadOp) {
			t.Fatalf("Apply(%q, %+v) error %v, want ErrBadOp", tc.scope, tc.ops, err)
		}
	}
}

func testApplyTake(t *testing.T, open Instances) {
	ss := open(t, 2)
	w := state.Window{Size: time.Minute}
	at := base.Add(20 * time.Second)
	takeOp := func(n, limit int64, at time.Time) state.Op {
		return state.Op{Kind: state.OpTake, Name: "tpm", N: n, Limit: limit, Window: w, At: at}
	}
	ok, res := apply(t, ss[0], "s", takeOp(600, 1000, at))
	if tk := res[0].Taken; !ok || tk.Count != 600 || tk.Remaining != 400 || tk.Reset != 40*time.Second || !tk.Start.Equal(base) {
		t.Fatalf("take 600: %+v", tk)
	}
	ok, res = apply(t, ss[1], "s", takeOp(500, 1000, at.Add(10*time.Second)))
	if tk := res[0].Taken; ok || tk.OK || tk.Count != 600 || tk.RetryAfter != 30*time.Second {
		t.Fatalf("take 500 over the limit: %+v", tk)
	}
	// The answer used 250 tokens, not 600: the correction reaches the
	// window of the original take, even a little after it.
	ok, res = apply(t, ss[1], "s", takeOp(250-600, -1, at))
	if !ok || res[0].Taken.Count != 250 {
		t.Fatalf("correction: %+v", res[0].Taken)
	}
	if ok, res = apply(t, ss[0], "s", takeOp(500, 1000, at.Add(15*time.Second))); !ok || res[0].Taken.Count != 750 {
		t.Fatalf("after the correction: %v %+v", ok, res[0].Taken)
	}
	// A sliding window counts the previous window, weighted.
	sw := state.Window{Size: time.Minute, Sliding: true}
	apply(t, ss[0], "s", state.Op{Kind: state.OpTake, Name: "rpm", N: 60, Limit: 100, Window: sw, At: base.Add(30 * time.Second)})
	_, res = apply(t, ss[1], "s", state.Op{Kind: state.OpTake, Name: "rpm", N: 56, Limit: 100, Window: sw, At: base.Add(75 * time.Second)})
	// 45 of the previous 60 still count (three quarters of the window):
	// 45+56 > 100.
	if tk := res[0].Taken; tk.OK || tk.Count != 45 {
		t.Fatalf("sliding: %+v", tk)
	}
	if tk := take(t, ss[0], "rpm", 0, 100, sw, base.Add(75*time.Second)); tk.Count != 0 {
		t.Fatalf("Apply's window is Take's: %+v", tk)
	}
}

func testApplySlotsExpire(t *testing.T, open Instances) {
	s := open(t, 1)[0]
	acq := func(holder string, ttl time.Duration) bool {
		_, r := apply(t, s, "s", state.Op{Kind: state.OpAcquireSlot, Name: "conc", Holder: holder, Limit: 1, TTL: ttl})
		return r[0].OK
	}
	const ttl = time.Second
	start := time.Now()
	if !acq("crashed", ttl) {
		t.Fatal("an empty 1-slot set refused a holder")
	}
	// The second holder must be refused while the first one's slot lives;
	// on a host so loaded that it took longer than that, the refusal
	// cannot be checked, only the slot's return.
	if took := acq("next", time.Minute); took && time.Since(start) < ttl {
		t.Fatal("a 1-slot set took two holders")
	} else if took {
		t.Logf("the second acquire came after the first slot's ttl; its refusal is not checked")
		apply(t, s, "s", state.Op{Kind: state.OpReleaseSlot, Name: "conc", Holder: "next"})
	}
	time.Sleep(time.Until(start.Add(ttl + 500*time.Millisecond)))
	if !acq("next", time.Minute) {
		t.Fatal("a crashed holder's slot did not come back")
	}
	_, r := apply(t, s, "s", state.Op{Kind: state.OpReleaseSlot, Name: "conc", Holder: "next"})
	if r[0].Slots != 0 {
		t.Fatalf("after release, %d slots taken", r[0].Slots)
	}
}

// Concurrent Applies of several instances, each reserving a budget and
// taking a rate window together: what was applied is counted exactly once
// in both, and neither limit is passed.
func testApplyConcurrent(t *testing.T, open Instances) {
	ss := open(t, 3)
	const budget, rpm = 200, 40
	w := state.Window{Size: time.Hour}
	at := base.Add(time.Minute)
	var (
		wg               sync.WaitGroup
		applied, amounts atomic.Int64
	)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[g%len(ss)]
			for i := range 5 {
				n := int64(1 + (g+i)%7)
				ops := []state.Op{
					{Kind: state.OpTake, Name: "rpm", N: 1, Limit: rpm, Window: w, At: at},
					{Kind: state.OpReserve, Name: "held", N: n, Limit: budget, With: []string{"spent"}, TTL: time.Minute},
					{Kind: state.OpAcquireSlot, Name: "conc", Holder: fmt.Sprint(g, "-", i), Limit: 1000, TTL: time.Minute},
				}
				res := make([]state.Result, len(ops))
				ok, err := s.Apply(ctxT(t), "tenant", ops, res)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					applied.Add(1)
					amounts.Add(n)
				}
			}
		}()
	}
	wg.Wait()
	_, res := apply(t, ss[0], "tenant",
		state.Op{Kind: state.OpTake, Name: "rpm", Limit: rpm, Window: w, At: at},
		state.Op{Kind: state.OpGet, Name: "held", With: []string{"spent"}},
		state.Op{Kind: state.OpAcquireSlot, Name: "conc", Holder: "probe", Limit: 1000, TTL: time.Minute})
	if res[0].Taken.Count != applied.Load() || applied.Load() > rpm {
		t.Fatalf("window counts %d, %d Applies applied (limit %d)", res[0].Taken.Count, applied.Load(), rpm)
	}
	if res[1].Total != amounts.Load() || amounts.Load() > budget {
		t.Fatalf("budget counts %d, the applied reservations sum to %d (limit %d)", res[1].Total, amounts.Load(), budget)
	}
	if res[2].Slots != applied.Load()+1 {
		t.Fatalf("%d slots taken after %d Applies applied", res[2].Slots-1, applied.Load())
	}
	if applied.Load() < rpm-1 && amounts.Load() < budget-7 {
		t.Fatalf("only %d applied with room left", applied.Load())
	}
}

// Ops with Refs count what the same ops without count, however the Refs
// are shared: the same ops are applied to the names of one scope without
// Refs and to those of another with three Refs handed out at random, one
// Ref serving many names of both scopes, and every result is the same.
func testApplyRefs(t *testing.T, open Instances) {
	ss := open(t, 2)
	rng := rand.New(rand.NewPCG(15, 2))
	names := []string{"a", "b", "c", "d"}
	refs := []*state.Ref{new(state.Ref), new(state.Ref), new(state.Ref)}
	windows := []state.Window{{Size: time.Minute, Sliding: true}, {Size: time.Minute}, {Size: 10 * time.Second, Sliding: true}}
	randomOp := func(step int) state.Op {
		op := state.Op{Name: names[rng.IntN(len(names))], N: int64(rng.IntN(9) - 2), TTL: time.Hour}
		switch rng.IntN(8) {
		case 0:
			op.Kind, op.IfExists = state.OpAdd, rng.IntN(2) == 0
		case 1:
			op.Kind = state.OpInit
		case 2:
			op.Kind = state.OpExists
		case 3, 4:
			op.Kind, op.Limit = state.OpReserve, int64(rng.IntN(40))
			if rng.IntN(4) == 0 {
				op.Kind = state.OpGet
			}
			for range rng.IntN(3) {
				op.With = append(op.With, names[rng.IntN(len(names))])
			}
		case 5, 6:
			op.Kind, op.Limit = state.OpTake, int64(rng.IntN(20)-1)
			op.Window, op.At = windows[rng.IntN(len(windows))], base.Add(time.Duration(step)*7*time.Second)
		default:
			op.Kind, op.Holder, op.Limit = state.OpAcquireSlot, fmt.Sprint("h", rng.IntN(4)), int64(rng.IntN(4))
			if rng.IntN(3) == 0 {
				op.Kind = state.OpReleaseSlot
			}
		}
		return op
	}
	// The counters With names are those named now, whatever an op on the
	// same name counted with before.
	s := ss[0]
	apply(t, s, "with", state.Op{Kind: state.OpAdd, Name: "x", N: 10}, state.Op{Kind: state.OpAdd, Name: "y", N: 20},
		state.Op{Kind: state.OpAdd, Name: "h", N: 1})
	for _, tc := range []struct {
		with []string
		want int64
	}{{[]string{"x"}, 11}, {[]string{"y"}, 21}, {[]string{"y", "x"}, 31}, {nil, 1}, {[]string{"x", "missing"}, 11}, {[]string{"missing", "y"}, 21}} {
		for _, ref := range []*state.Ref{nil, refs[0]} {
			if _, r := apply(t, ss[1], "with", state.Op{Kind: state.OpGet, Name: "h", With: tc.with, Ref: ref}); r[0].Total != tc.want {
				t.Fatalf("get h with %q: %d, want %d", tc.with, r[0].Total, tc.want)
			}
		}
	}
	for step := range 300 {
		ops := make([]state.Op, 1+rng.IntN(4))
		withRefs := make([]state.Op, len(ops))
		for i := range ops {
			ops[i] = randomOp(step)
			withRefs[i] = ops[i]
			withRefs[i].Ref = refs[rng.IntN(len(refs))]
		}
		s := ss[step%len(ss)]
		ok, want := apply(t, s, "plain", ops...)
		okRef, got := apply(t, s, "refs", withRefs...)
		if ok != okRef || !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: %+v\napplied %v with Refs: %+v\napplied %v without: %+v", step, ops, okRef, got, ok, want)
		}
	}
}

// UpTo reservations and takes count as much as fits, at least Min, and
// say what they counted; with Min 0 they never refuse.
func testApplyUpTo(t *testing.T, open Instances) {
	ss := open(t, 2)
	a, b := ss[0], ss[1]
	reserve := func(s state.State, n, least int64) (bool, state.Result) {
		ok, res := apply(t, s, "s", state.Op{Kind: state.OpAdd, Name: "spent", N: 0},
			state.Op{Kind: state.OpReserve, Name: "lease", N: n, Min: least, UpTo: true, Limit: 10, With: []string{"spent"}, TTL: time.Minute})
		return ok, res[1]
	}
	apply(t, a, "s", state.Op{Kind: state.OpAdd, Name: "spent", N: 3})
	if ok, r := reserve(a, 4, 4); !ok || r.Granted != 4 || r.Value != 4 || r.Total != 7 {
		t.Fatalf("up to 4 with 7 left: %v %+v", ok, r)
	}
	if ok, r := reserve(b, 8, 0); !ok || r.Granted != 3 || r.Value != 7 || r.Total != 10 {
		t.Fatalf("up to 8 with 3 left: %v %+v", ok, r)
	}
	if ok, r := reserve(a, 5, 0); !ok || r.Granted != 0 || r.Total != 10 {
		t.Fatalf("up to 5, at least 0, with none left: %v %+v", ok, r)
	}
	apply(t, b, "s", state.Op{Kind: state.OpAdd, Name: "spent", N: -2})
	if ok, r := reserve(a, 5, 3); ok || r.OK || r.Granted != 2 {
		t.Fatalf("up to 5, at least 3, with 2 left: %v %+v", ok, r)
	}
	if v, _ := get(t, b, "s", "lease"); v != 7 {
		t.Fatalf("a refused up-to reservation counted: lease = %d, want 7", v)
	}

	// Takes: a sliding window of 100 with 70 taken.
	w := state.Window{Size: time.Minute, Sliding: true}
	at := base.Add(10 * time.Second)
	take := func(s state.State, n, least, limit int64, others ...state.Op) (bool, state.Result) {
		ops := append([]state.Op{{Kind: state.OpTake, Name: "rpm", N: n, Min: least, UpTo: true, Limit: limit, Window: w, At: at}}, others...)
		ok, res := apply(t, s, "s", ops...)
		return ok, res[0]
	}
	apply(t, a, "s", state.Op{Kind: state.OpTake, Name: "rpm", N: 70, Limit: 100, Window: w, At: at})
	if ok, r := take(b, 50, 1, 100); !ok || r.Granted != 30 || r.Taken.Count != 100 || r.Taken.Remaining != 0 {
		t.Fatalf("up to 50 with 30 left: %v %+v", ok, r)
	}
	if ok, r := take(a, 5, 0, 100); !ok || r.Granted != 0 || r.Taken.Count != 100 {
		t.Fatalf("up to 5, at least 0, with none left: %v %+v", ok, r)
	}
	if ok, r := take(a, 5, 1, 100); ok || r.Taken.OK || r.Taken.RetryAfter <= 0 {
		t.Fatalf("up to 5, at least 1, with none left: %v %+v", ok, r)
	}
	if ok, r := take(b, 5, 5, -1); !ok || r.Granted != 5 || r.Taken.Count != 105 {
		t.Fatalf("up to 5 without a limit: %v %+v", ok, r)
	}
	// An Apply that refuses counts no grant.
	apply(t, a, "s", state.Op{Kind: state.OpTake, Name: "rpm", N: -20, Limit: -1, Window: w, At: at})
	if ok, r := take(a, 10, 1, 100, state.Op{Kind: state.OpExists, Name: "nothing"}); ok || !r.OK || r.Granted != 10 {
		t.Fatalf("up to 10 beside a refusal: %v %+v", ok, r)
	}
	if _, r := take(b, 0+1, 0, -1); r.Taken.Count != 86 {
		t.Fatalf("a refused Apply left its grant: the window counts %d, want 86", r.Taken.Count)
	}
}

// An Apply that begins with OpAdvance is applied once, however often it
// is sent.
func testApplyAdvance(t *testing.T, open Instances) {
	ss := open(t, 2)
	settle := func(s state.State, seq int64) (bool, []state.Result) {
		return apply(t, s, "s", state.Op{Kind: state.OpAdvance, Name: "fence", N: seq, TTL: time.Minute},
			state.Op{Kind: state.OpAdd, Name: "spent", N: 5})
	}
	ok, res := settle(ss[0], 1)
	if !ok || !res[0].Missing || res[0].Value != 0 {
		t.Fatalf("the first settlement: %v %+v", ok, res[0])
	}
	// Sent again (its answer lost): refused, nothing added twice.
	if ok, res = settle(ss[1], 1); ok || res[0].OK || res[0].Value != 1 {
		t.Fatalf("the same settlement again: %v %+v", ok, res[0])
	}
	if ok, res = settle(ss[0], 3); !ok || res[0].Missing || res[0].Value != 1 {
		t.Fatalf("the next settlement: %v %+v", ok, res[0])
	}
	if ok, _ = settle(ss[1], 2); ok {
		t.Fatal("an older settlement was applied after a newer one")
	}
	if v, _ := get(t, ss[1], "s", "spent"); v != 10 {
		t.Fatalf("spent = %d after two settlements of 5, each sent twice", v)
	}
	if v, _ := get(t, ss[1], "s", "fence"); v != 3 {
		t.Fatalf("fence = %d, want 3", v)
	}
	// The fence expires TTL after its last advance.
	apply(t, ss[0], "s", state.Op{Kind: state.OpAdvance, Name: "short", N: 7, TTL: 200 * time.Millisecond})
	time.Sleep(350 * time.Millisecond)
	if _, exists := get(t, ss[0], "s", "short"); exists {
		t.Fatal("a fence outlived its TTL")
	}
}

// OpDelete deletes a counter, after OpExists found it: an Apply guarded
// so is applied once, however often it is sent (a mark that the first
// one deletes), and a refused Apply deletes nothing.
func testApplyDelete(t *testing.T, open Instances) {
	ss := open(t, 2)
	apply(t, ss[0], "s", state.Op{Kind: state.OpInit, Name: "mark", N: 1, TTL: time.Minute})
	settle := func(s state.State) (bool, []state.Result) {
		return apply(t, s, "s", state.Op{Kind: state.OpAdd, Name: "spent", N: 5},
			state.Op{Kind: state.OpExists, Name: "mark"}, state.Op{Kind: state.OpDelete, Name: "mark"})
	}
	if ok, res := settle(ss[0]); !ok || res[2].Missing || res[2].Value != 1 {
		t.Fatalf("the first settlement: %v %+v", ok, res)
	}
	if ok, res := settle(ss[1]); ok || res[1].OK || !res[1].Missing {
		t.Fatalf("the same settlement again: %v %+v", ok, res)
	}
	if v, _ := get(t, ss[1], "s", "spent"); v != 5 {
		t.Fatalf("spent = %d after a settlement of 5 sent twice", v)
	}
	if _, exists := get(t, ss[1], "s", "mark"); exists {
		t.Fatal("the mark outlived its deletion")
	}
	// A counter that does not exist is deleted as a no-op, and reported
	// missing; an Apply that refuses deletes nothing.
	if ok, res := apply(t, ss[0], "s", state.Op{Kind: state.OpDelete, Name: "nothing"}); !ok || !res[0].Missing {
		t.Fatalf("deleting what is not there: %v %+v", ok, res)
	}
	if ok, _ := apply(t, ss[0], "s", state.Op{Kind: state.OpDelete, Name: "spent"}, state.Op{Kind: state.OpExists, Name: "nothing"}); ok {
		t.Fatal("an Apply that should refuse was applied")
	}
	if v, exists := get(t, ss[1], "s", "spent"); !exists || v != 5 {
		t.Fatalf("a refused Apply deleted a counter: %d, %v", v, exists)
	}
}

// OpLeaseSlots holds a range of slots for a holder, beside the holders
// of OpAcquireSlot, and OpFreeSlots frees them.
func testApplyLeaseSlots(t *testing.T, open Instances) {
	ss := open(t, 2)
	a, b := ss[0], ss[1]
	lease := func(s state.State, from, n, least int64, ttl time.Duration) (bool, state.Result) {
		ok, res := apply(t, s, "s", state.Op{Kind: state.OpLeaseSlots, Name: "conc", Holder: "inst", From: from, N: n, Min: least, Limit: 5, TTL: ttl})
		return ok, res[0]
	}
	acq := func(s state.State, holder string) state.Result {
		_, res := apply(t, s, "s", state.Op{Kind: state.OpAcquireSlot, Name: "conc", Holder: holder, Limit: 5, TTL: time.Minute})
		return res[0]
	}
	free := func(s state.State, from, n int64) state.Result {
		_, res := apply(t, s, "s", state.Op{Kind: state.OpFreeSlots, Name: "conc", Holder: "inst", From: from, N: n})
		return res[0]
	}
	if r := acq(b, "x"); !r.OK {
		t.Fatalf("x: %+v", r)
	}
	if ok, r := lease(a, 0, 3, 1, time.Minute); !ok || r.Granted != 3 || r.Slots != 4 {
		t.Fatalf("slots 0-2: %v %+v", ok, r)
	}
	if ok, r := lease(a, 3, 3, 0, time.Minute); !ok || r.Granted != 1 || r.Slots != 5 {
		t.Fatalf("slots 3-5 with one left: %v %+v", ok, r)
	}
	if r := acq(b, "y"); r.OK || r.Slots != 5 {
		t.Fatalf("y beside four leased slots and x: %+v", r)
	}
	// Renewing what it has takes nothing new.
	if ok, r := lease(b, 0, 4, 4, time.Minute); !ok || r.Granted != 4 || r.Slots != 5 {
		t.Fatalf("renewing slots 0-3: %v %+v", ok, r)
	}
	if ok, r := lease(a, 4, 2, 1, time.Minute); ok || r.OK {
		t.Fatalf("slots 4-5, at least 1, when full: %v %+v", ok, r)
	}
	if r := free(a, 1, 1); r.Slots != 4 {
		t.Fatalf("freeing slot 1: %+v", r)
	}
	if r := acq(b, "y"); !r.OK || r.Slots != 5 {
		t.Fatalf("y after slot 1 was freed: %+v", r)
	}
	// Slot 1 does not fit now: the range stops there, and slots 2 and 3
	// are freed, so the holder holds 0 alone.
	if ok, r := lease(a, 0, 4, 0, time.Minute); !ok || r.Granted != 1 || r.Slots != 3 {
		t.Fatalf("slots 0-3 with 1 taken by y: %v %+v", ok, r)
	}
	if r := free(b, 0, 4); r.Slots != 2 {
		t.Fatalf("freeing every slot of the holder: %+v", r)
	}
	// Leased slots expire as other holders do.
	if ok, r := lease(a, 0, 3, 3, 200*time.Millisecond); !ok || r.Slots != 5 {
		t.Fatalf("slots 0-2 for 200ms: %v %+v", ok, r)
	}
	time.Sleep(350 * time.Millisecond)
	if r := acq(b, "z"); !r.OK || r.Slots != 3 {
		t.Fatalf("after the leased slots expired: %+v", r)
	}
}
