// Package statetest is the conformance suite every state.State
// implementation passes: the in-process one and the Redis one run the same
// tests, so code written against state.State behaves the same on one
// machine and on a cluster.
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, func(t *testing.T, n int) []state.State { … })
//	}
package statetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
)

// Instances opens a fresh state for one test, empty and apart from every
// other test's, and returns n handles on it as n instances of a gateway
// would hold them (for the in-process state, the same value n times; for
// Redis, n clients). It closes them when t ends.
type Instances func(t *testing.T, n int) []state.State

// Run runs the suite against the implementation open makes.
func Run(t *testing.T, open Instances) {
	tests := []struct {
		name string
		f    func(t *testing.T, open Instances)
	}{
		{"AddAndGet", testAddAndGet},
		{"AddExpiry", testAddExpiry},
		{"ExistingCounterKeepsExpiry", testKeepsExpiry},
		{"Reserve", testReserve},
		{"ReserveConcurrent", testReserveConcurrent},
		{"Reset", testReset},
		{"TakeFixed", testTakeFixed},
		{"TakeSliding", testTakeSliding},
		{"TakeCorrection", testTakeCorrection},
		{"TakeConcurrent", testTakeConcurrent},
		{"ApplyAllOrNothing", testApplyAllOrNothing},
		{"ApplyOrderAndSeeding", testApplyOrderAndSeeding},
		{"ApplyScopes", testApplyScopes},
		{"ApplyTake", testApplyTake},
		{"ApplySlotsExpire", testApplySlotsExpire},
		{"ApplyConcurrent", testApplyConcurrent},
		{"ApplyRefs", testApplyRefs},
		{"ApplyUpTo", testApplyUpTo},
		{"ApplyAdvance", testApplyAdvance},
		{"ApplyDelete", testApplyDelete},
		{"ApplyLeaseSlots", testApplyLeaseSlots},
		{"Lease", testLease},
		{"LeaseExpiryFences", testLeaseExpiry},
		{"LeaseRenewKeepsIt", testLeaseRenew},
		{"LeaseConcurrent", testLeaseConcurrent},
		{"Slots", testSlots},
		{"SlotsExpire", testSlotsExpire},
		{"SlotsConcurrent", testSlotsConcurrent},
		{"PubSub", testPubSub},
		{"PubSubOrderAndBinary", testPubSubOrder},
		{"PubSubClose", testPubSubClose},
		{"Ping", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must returns v, failing the test it is given on err:
// must(s.Get(ctx, k))(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testAddAndGet(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	a, b := ss[0], ss[1]
	if c := must(a.Get(ctx, "missing"))(t); c != (state.Count{}) {
		t.Fatalf("Get of a missing counter = %+v, want zero", c)
	}
	if v := must(a.Add(ctx, "k", 5, 0))(t); v != 5 {
		t.Fatalf("Add 5 = %d", v)
	}
	if v := must(b.Add(ctx, "k", -7, 0))(t); v != -2 {
		t.Fatalf("Add -7 on another instance = %d, want -2", v)
	}
	c := must(b.Get(ctx, "k"))(t)
	if c.Value != -2 || c.TTL != 0 {
		t.Fatalf("Get = %+v, want -2 with no expiry", c)
	}
	if v := must(a.Get(ctx, "other"))(t); v.Value != 0 {
		t.Fatalf("counters are not independent: other = %d", v.Value)
	}
}

func testAddExpiry(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	must(s.Add(ctx, "k", 3, 300*time.Millisecond))(t)
	c := must(s.Get(ctx, "k"))(t)
	if c.Value != 3 || c.TTL <= 0 || c.TTL > 300*time.Millisecond {
		t.Fatalf("Get = %+v, want 3 with a TTL in (0, 300ms]", c)
	}
	time.Sleep(450 * time.Millisecond)
	if c := must(s.Get(ctx, "k"))(t); c.Value != 0 {
		t.Fatalf("after its TTL, Get = %+v, want 0", c)
	}
	// An expired counter starts again from 0, with a new expiry.
	if v := must(s.Add(ctx, "k", 1, time.Minute))(t); v != 1 {
		t.Fatalf("Add after expiry = %d, want 1", v)
	}
}

func testKeepsExpiry(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	// Margins of a second and more: a loaded machine running the race
	// detector stalls a test for hundreds of milliseconds.
	must(s.Add(ctx, "k", 1, 2*time.Second))(t)
	time.Sleep(500 * time.Millisecond)
	must(s.Add(ctx, "k", 1, 2*time.Second))(t) // does not extend it
	c := must(s.Get(ctx, "k"))(t)
	if c.Value != 2 || c.TTL > 1600*time.Millisecond {
		t.Fatalf("Get = %+v, want 2 with at most 1.5s left", c)
	}
	time.Sleep(c.TTL + 300*time.Millisecond)
	if c := must(s.Get(ctx, "k"))(t); c.Value != 0 {
		t.Fatalf("a second Add extended the expiry: %+v", c)
	}
	// A counter without expiry does not get one from a later Add.
	must(s.Add(ctx, "forever", 1, 0))(t)
	must(s.Add(ctx, "forever", 1, 100*time.Millisecond))(t)
	time.Sleep(200 * time.Millisecond)
	if c := must(s.Get(ctx, "forever"))(t); c.Value != 2 || c.TTL != 0 {
		t.Fatalf("forever = %+v, want 2 without expiry", c)
	}
}

func testReserve(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	reserve := func(n int64, wantOK bool, wantV int64) {
		t.Helper()
		c, ok, err := s.Reserve(ctx, "budget", n, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok != wantOK || c.Value != wantV {
			t.Fatalf("Reserve(%d) = %d, %v; want %d, %v", n, c.Value, ok, wantV, wantOK)
		}
		if c.TTL <= 0 || c.TTL > time.Minute {
			t.Fatalf("Reserve TTL = %v, want (0, 1m]", c.TTL)
		}
	}
	reserve(4, true, 4)
	reserve(6, true, 10) // exactly at the limit fits
	reserve(1, false, 10)
	// Settling below the estimate frees room.
	must(s.Add(ctx, "budget", -3, time.Minute))(t)
	reserve(4, false, 7)
	reserve(3, true, 10)

	// A refused reservation on a missing counter creates nothing.
	if _, ok, _ := s.Reserve(ctx, "small", 5, 4, time.Minute); ok {
		t.Fatal("Reserve over the limit on a new counter succeeded")
	}
	if c := must(s.Get(ctx, "small"))(t); c != (state.Count{}) {
		t.Fatalf("a refused Reserve left %+v", c)
	}
	// Without TTL, no expiry.
	if c, ok, _ := s.Reserve(ctx, "total", 1, 1, 0); !ok || c.TTL != 0 {
		t.Fatalf("Reserve without ttl = %+v, %v", c, ok)
	}
}

func testReserveConcurrent(t *testing.T, open Instances) {
	ss, ctx := open(t, 3), ctxT(t)
	const limit = 100
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
	)
	for g := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[g%len(ss)]
			for i := range 10 {
				n := int64(1 + (g+i)%3)
				_, ok, err := s.Reserve(ctx, "budget", n, limit, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					accepted.Add(n)
				}
			}
		}()
	}
	wg.Wait()
	c := must(ss[0].Get(ctx, "budget"))(t)
	if c.Value != accepted.Load() || c.Value > limit {
		t.Fatalf("counter %d, accepted %d, limit %d: a burst overshot or lost a count", c.Value, accepted.Load(), limit)
	}
	if c.Value < limit-2 {
		t.Fatalf("counter %d: reservations that fit were refused (limit %d)", c.Value, limit)
	}
}

func testReset(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	must(s.Add(ctx, "k", 9, 0))(t)
	if err := s.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if c := must(s.Get(ctx, "k"))(t); c.Value != 0 {
		t.Fatalf("after Reset, %+v", c)
	}
	if err := s.Reset(ctx, "never-there"); err != nil {
		t.Fatalf("Reset of a missing counter: %v", err)
	}
}

// base is a time at the start of a minute, far from now: windows are
// computed from the time given, so the tests are exact.
var base = time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)

func take(t *testing.T, s state.State, key string, n, limit int64, w state.Window, at time.Time) state.Taken {
	t.Helper()
	tk, err := s.Take(ctxT(t), key, n, limit, w, at)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func testTakeFixed(t *testing.T, open Instances) {
	ss := open(t, 2)
	w := state.Window{Size: time.Minute}
	at := base.Add(15 * time.Second)
	for i := range 3 {
		tk := take(t, ss[i%2], "rpm", 1, 3, w, at)
		if !tk.OK || tk.Count != int64(i+1) || tk.Remaining != int64(2-i) {
			t.Fatalf("take %d = %+v", i, tk)
		}
		if tk.Reset != 45*time.Second || !tk.Start.Equal(base) {
			t.Fatalf("take %d: Reset %v, Start %v; want 45s, %v", i, tk.Reset, tk.Start, base)
		}
	}
	tk := take(t, ss[1], "rpm", 1, 3, w, at.Add(5*time.Second))
	if tk.OK || tk.Count != 3 || tk.Remaining != 0 || tk.RetryAfter != 40*time.Second {
		t.Fatalf("over the limit: %+v; want refused, count 3, retry after 40s", tk)
	}
	// Tokens of a bigger n than fits are refused while smaller ones fit.
	if tk := take(t, ss[0], "tpm", 700, 1000, w, at); !tk.OK {
		t.Fatalf("700 of 1000: %+v", tk)
	}
	if tk := take(t, ss[0], "tpm", 301, 1000, w, at); tk.OK || tk.Count != 700 {
		t.Fatalf("301 more of 1000: %+v", tk)
	}
	if tk := take(t, ss[0], "tpm", 2000, 1000, w, at); tk.OK || tk.RetryAfter >= 0 {
		t.Fatalf("more than the limit can ever hold: %+v, want a negative RetryAfter", tk)
	}
	// The next window starts from 0.
	if tk := take(t, ss[0], "rpm", 1, 3, w, base.Add(time.Minute)); !tk.OK || tk.Count != 1 {
		t.Fatalf("next window: %+v", tk)
	}
	// Another window size under the same key is another count.
	if tk := take(t, ss[0], "rpm", 1, 3, state.Window{Size: time.Hour}, at); !tk.OK || tk.Count != 1 {
		t.Fatalf("hour window: %+v", tk)
	}
	// No limit: always counted.
	if tk := take(t, ss[0], "rpm", 10, -1, w, at); !tk.OK || tk.Count != 13 || tk.Remaining != 0 {
		t.Fatalf("limit -1: %+v", tk)
	}
	if _, err := ss[0].Take(ctxT(t), "rpm", 1, 3, state.Window{Size: time.Microsecond}, at); err == nil {
		t.Fatal("a window under a millisecond was accepted")
	}
}

func testTakeSliding(t *testing.T, open Instances) {
	s := open(t, 1)[0]
	w := state.Window{Size: time.Minute, Sliding: true}
	for range 10 {
		take(t, s, "rpm", 1, 10, w, base.Add(50*time.Second))
	}
	// 15s into the next minute, the previous minute's 10 weigh 10*45/60 =
	// 7.5, counted as 7: three more fit.
	at := base.Add(75 * time.Second)
	for i := range 3 {
		tk := take(t, s, "rpm", 1, 10, w, at)
		if !tk.OK || tk.Count != int64(8+i) {
			t.Fatalf("take %d at +75s = %+v", i, tk)
		}
		if !tk.Start.Equal(base.Add(time.Minute)) || tk.Reset != 105*time.Second {
			t.Fatalf("Start %v Reset %v", tk.Start, tk.Reset)
		}
	}
	tk := take(t, s, "rpm", 1, 10, w, at)
	if tk.OK || tk.Count != 10 {
		t.Fatalf("fourth at +75s = %+v, want refused at 10", tk)
	}
	// One more fits once the previous count weighs 6: 10*(60-e)/60 < 7
	// from e = 18001ms, i.e. 3.001s after +75s.
	if tk.RetryAfter != 3001*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want 3.001s", tk.RetryAfter)
	}
	if tk := take(t, s, "rpm", 1, 10, w, at.Add(3000*time.Millisecond)); tk.OK {
		t.Fatalf("a millisecond early: %+v", tk)
	}
	if tk := take(t, s, "rpm", 1, 10, w, at.Add(3001*time.Millisecond)); !tk.OK || tk.Count != 10 {
		t.Fatalf("at RetryAfter: %+v", tk)
	}
	// A fixed window of the same size is another count.
	if tk := take(t, s, "rpm", 1, 10, state.Window{Size: time.Minute}, at); !tk.OK || tk.Count != 1 {
		t.Fatalf("fixed window beside the sliding one: %+v", tk)
	}
}

func testTakeCorrection(t *testing.T, open Instances) {
	ss := open(t, 2)
	w := state.Window{Size: time.Minute}
	at := base.Add(59 * time.Second)
	if tk := take(t, ss[0], "tpm", 800, 1000, w, at); !tk.OK {
		t.Fatal(tk)
	}
	// The answer comes in the next minute: 300 tokens, not 800. The
	// correction goes to the window of the estimate.
	if tk := take(t, ss[1], "tpm", -500, 1000, w, at); !tk.OK || tk.Count != 300 {
		t.Fatalf("correction: %+v", tk)
	}
	if tk := take(t, ss[0], "tpm", 1, 1000, w, base.Add(61*time.Second)); tk.Count != 1 {
		t.Fatalf("the next window saw the correction: %+v", tk)
	}
	if tk := take(t, ss[0], "tpm", 700, 1000, w, at); !tk.OK || tk.Count != 1000 {
		t.Fatalf("room freed by the correction: %+v", tk)
	}
	// Over the estimate: a positive correction always applies.
	if tk := take(t, ss[0], "tpm", 50, -1, w, at); !tk.OK || tk.Count != 1050 {
		t.Fatalf("upward correction: %+v", tk)
	}
}

func testTakeConcurrent(t *testing.T, open Instances) {
	ss := open(t, 3)
	w := state.Window{Size: time.Minute, Sliding: true}
	at := time.Now()
	var (
		wg sync.WaitGroup
		ok atomic.Int64
	)
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := ss[g%3].Take(ctxT(t), "burst", 1, 25, w, at)
			if err != nil {
				t.Error(err)
			} else if tk.OK {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 25 {
		t.Fatalf("%d of 40 concurrent takes fit a limit of 25", ok.Load())
	}
}

func testLease(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	a, b := ss[0], ss[1]
	l1, ok, err := a.AcquireLease(ctx, "part-1", "inst-a", time.Minute)
	if err != nil || !ok || l1.Token <= 0 || l1.Holder != "inst-a" || l1.Name != "part-1" {
		t.Fatalf("AcquireLease = %+v, %v, %v", l1, ok, err)
	}
	cur, ok, err := b.AcquireLease(ctx, "part-1", "inst-b", time.Minute)
	if err != nil || ok {
		t.Fatalf("a held lease was acquired again: %+v %v %v", cur, ok, err)
	}
	if cur.Holder != "inst-a" || cur.Token != l1.Token || cur.TTL <= 0 || cur.TTL > time.Minute {
		t.Fatalf("the refusal names %+v, want inst-a's lease", cur)
	}
	got, ok, err := b.GetLease(ctx, "part-1")
	if err != nil || !ok || got.Token != l1.Token || got.Holder != "inst-a" {
		t.Fatalf("GetLease = %+v %v %v", got, ok, err)
	}
	if err := b.RenewLease(ctx, "part-1", l1.Token+1, time.Minute); !errors.Is(err, state.ErrLeaseLost) {
		t.Fatalf("renewing with a wrong token: %v, want ErrLeaseLost", err)
	}
	if err := b.ReleaseLease(ctx, "part-1", l1.Token+1); !errors.Is(err, state.ErrLeaseLost) {
		t.Fatalf("releasing with a wrong token: %v", err)
	}
	if _, ok, _ := b.GetLease(ctx, "part-1"); !ok {
		t.Fatal("a wrong token released the lease")
	}
	if err := b.RenewLease(ctx, "part-1", l1.Token, time.Minute); err != nil {
		t.Fatalf("renewing with the token from another instance: %v", err)
	}
	if err := a.ReleaseLease(ctx, "part-1", l1.Token); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.GetLease(ctx, "part-1"); ok {
		t.Fatal("still held after release")
	}
	if err := a.ReleaseLease(ctx, "part-1", l1.Token); !errors.Is(err, state.ErrLeaseLost) {
		t.Fatalf("releasing twice: %v", err)
	}
	// Tokens grow with every acquisition of a name.
	prev := l1.Token
	for i := range 5 {
		l, ok, err := ss[i%2].AcquireLease(ctx, "part-1", "x", time.Minute)
		if err != nil || !ok || l.Token <= prev {
			t.Fatalf("acquisition %d: %+v %v %v (previous token %d)", i, l, ok, err, prev)
		}
		prev = l.Token
		if err := ss[(i+1)%2].ReleaseLease(ctx, "part-1", l.Token); err != nil {
			t.Fatal(err)
		}
	}
	// Names are independent.
	if _, ok, _ := a.AcquireLease(ctx, "part-2", "x", time.Minute); !ok {
		t.Fatal("part-2 not free")
	}
}

func testLeaseExpiry(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	stale, ok, _ := ss[0].AcquireLease(ctx, "job", "a", 200*time.Millisecond)
	if !ok {
		t.Fatal("not acquired")
	}
	time.Sleep(350 * time.Millisecond) // a stalls past its lease
	if _, ok, _ := ss[1].GetLease(ctx, "job"); ok {
		t.Fatal("an expired lease is still reported")
	}
	fresh, ok, err := ss[1].AcquireLease(ctx, "job", "b", time.Minute)
	if err != nil || !ok || fresh.Token <= stale.Token {
		t.Fatalf("after expiry: %+v %v %v, stale token %d", fresh, ok, err, stale.Token)
	}
	// The stale holder learns it lost the lease and cannot disturb b.
	if err := ss[0].RenewLease(ctx, "job", stale.Token, time.Minute); !errors.Is(err, state.ErrLeaseLost) {
		t.Fatalf("stale renew: %v", err)
	}
	if err := ss[0].ReleaseLease(ctx, "job", stale.Token); !errors.Is(err, state.ErrLeaseLost) {
		t.Fatalf("stale release: %v", err)
	}
	if l, ok, _ := ss[0].GetLease(ctx, "job"); !ok || l.Holder != "b" || l.Token != fresh.Token {
		t.Fatalf("b's lease after the stale holder's attempts: %+v %v", l, ok)
	}
}

func testLeaseRenew(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	// Renewed every quarter of the lease for longer than the lease: a
	// stall of up to three quarters of a second does not lose it.
	l, _, _ := ss[0].AcquireLease(ctx, "job", "a", time.Second)
	for range 6 {
		time.Sleep(250 * time.Millisecond)
		if err := ss[0].RenewLease(ctx, "job", l.Token, time.Second); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if _, ok, _ := ss[1].AcquireLease(ctx, "job", "b", time.Minute); ok {
			t.Fatal("a renewed lease was taken")
		}
	}
}

func testLeaseConcurrent(t *testing.T, open Instances) {
	ss := open(t, 3)
	var (
		wg     sync.WaitGroup
		won    atomic.Int64
		tokens sync.Map
	)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, ok, err := ss[g%3].AcquireLease(ctxT(t), "one", fmt.Sprint("h", g), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				won.Add(1)
				tokens.Store(l.Token, true)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d holders of one lease", won.Load())
	}
}

func testSlots(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	acq := func(s state.State, holder string, wantOK bool, wantN int64) {
		t.Helper()
		n, ok, err := s.AcquireSlot(ctx, "key-1", holder, 2, time.Minute)
		if err != nil || ok != wantOK || n != wantN {
			t.Fatalf("AcquireSlot(%s) = %d, %v, %v; want %d, %v", holder, n, ok, err, wantN, wantOK)
		}
	}
	acq(ss[0], "r1", true, 1)
	acq(ss[1], "r2", true, 2)
	acq(ss[0], "r3", false, 2)
	acq(ss[1], "r1", true, 2) // a holder extends its own slot
	if err := ss[1].ReleaseSlot(ctx, "key-1", "r1"); err != nil {
		t.Fatal(err)
	}
	acq(ss[0], "r3", true, 2)
	if err := ss[0].ReleaseSlot(ctx, "key-1", "nobody"); err != nil {
		t.Fatalf("releasing no slot: %v", err)
	}
	acq(ss[0], "r4", false, 2)
	// Names are independent.
	if _, ok, _ := ss[0].AcquireSlot(ctx, "key-2", "r4", 1, time.Minute); !ok {
		t.Fatal("key-2 not free")
	}
}

func testSlotsExpire(t *testing.T, open Instances) {
	s, ctx := open(t, 1)[0], ctxT(t)
	if _, ok, _ := s.AcquireSlot(ctx, "k", "crashed", 1, 200*time.Millisecond); !ok {
		t.Fatal("not acquired")
	}
	if _, ok, _ := s.AcquireSlot(ctx, "k", "next", 1, time.Minute); ok {
		t.Fatal("acquired a taken slot")
	}
	time.Sleep(350 * time.Millisecond)
	if n, ok, _ := s.AcquireSlot(ctx, "k", "next", 1, time.Minute); !ok || n != 1 {
		t.Fatalf("a crashed holder's slot did not come back: %d %v", n, ok)
	}
}

func testSlotsConcurrent(t *testing.T, open Instances) {
	ss := open(t, 3)
	var (
		wg sync.WaitGroup
		ok atomic.Int64
	)
	for g := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, got, err := ss[g%3].AcquireSlot(ctxT(t), "conc", fmt.Sprint("req-", g), 5, time.Minute)
			if err != nil {
				t.Error(err)
			} else if got {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d of 30 concurrent holders got one of 5 slots", ok.Load())
	}
}

// receive waits for the next message of sub.
func receive(t *testing.T, sub state.Subscription) state.Message {
	t.Helper()
	select {
	case m, ok := <-sub.Messages():
		if !ok {
			t.Fatal("subscription closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return state.Message{}
}

// nothing checks that no message arrives for a little while.
func nothing(t *testing.T, sub state.Subscription) {
	t.Helper()
	select {
	case m := <-sub.Messages():
		t.Fatalf("unexpected message %+v", m)
	case <-time.After(150 * time.Millisecond):
	}
}

func testPubSub(t *testing.T, open Instances) {
	ss, ctx := open(t, 3), ctxT(t)
	subA := must(ss[0].Subscribe(ctx, "keys", "batches"))(t)
	subB := must(ss[1].Subscribe(ctx, "keys"))(t)
	defer func() { _ = subA.Close() }()
	defer func() { _ = subB.Close() }()
	if !subA.Live() || !subB.Live() {
		t.Fatal("subscriptions not live after Subscribe returned")
	}
	if err := ss[2].Publish(ctx, "keys", []byte("deleted k1")); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []state.Subscription{subA, subB} {
		m := receive(t, sub)
		if m.Channel != "keys" || string(m.Payload) != "deleted k1" || m.Resync {
			t.Fatalf("got %+v", m)
		}
	}
	noErr(t, ss[2].Publish(ctx, "batches", []byte("cancel b1")))
	if m := receive(t, subA); m.Channel != "batches" || string(m.Payload) != "cancel b1" {
		t.Fatalf("got %+v", m)
	}
	nothing(t, subB) // not subscribed to batches
	noErr(t, ss[2].Publish(ctx, "elsewhere", []byte("x")))
	noErr(t, ss[0].Publish(ctx, "nobody-listens", nil))
	nothing(t, subA)
}

func testPubSubOrder(t *testing.T, open Instances) {
	ss, ctx := open(t, 2), ctxT(t)
	sub := must(ss[0].Subscribe(ctx, "c"))(t)
	defer func() { _ = sub.Close() }()
	const n = 500
	payload := func(i int) []byte { return []byte{0, byte(i), 0xff, byte(i >> 8), '\n', '\r'} }
	pubErr := make(chan error, 1)
	go func() {
		for i := range n {
			if err := ss[1].Publish(ctx, "c", payload(i)); err != nil {
				pubErr <- fmt.Errorf("publish %d: %w", i, err)
				return
			}
		}
		pubErr <- nil
	}()
	defer func() {
		if err := <-pubErr; err != nil {
			t.Error(err)
		}
	}()
	for i := range n {
		m := receive(t, sub)
		if m.Resync {
			t.Fatalf("resync at message %d: a receiver keeping up lost messages", i)
		}
		if !bytes.Equal(m.Payload, payload(i)) {
			t.Fatalf("message %d = %q, want %q (out of order or altered)", i, m.Payload, payload(i))
		}
	}
}

func testPubSubClose(t *testing.T, open Instances) {
	ss, ctx := open(t, 1), ctxT(t)
	sub := must(ss[0].Subscribe(ctx, "c"))(t)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-sub.Messages():
			if !ok {
				if sub.Live() {
					t.Fatal("Live after Close")
				}
				noErr(t, ss[0].Publish(ctx, "c", []byte("after close")))
				return
			}
		case <-deadline:
			t.Fatal("Messages not closed after Close")
		}
	}
}

func testPing(t *testing.T, open Instances) {
	s := open(t, 1)[0]
	if err := s.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
