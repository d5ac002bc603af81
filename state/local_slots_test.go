package state

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestLocalSlotsExpire: with holders of different lifetimes acquired,
// released and left to expire in every order, through AcquireSlot and
// ReleaseSlot or through Apply, the live holders Local counts are those
// a plain model of the set counts (expired holders never count, live ones
// always do), though Local scans a set for expired holders only when one
// may have expired.
func TestLocalSlotsExpire(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		now := t0
		l := newLocal(func() time.Time { return now })
		model := map[string]time.Time{} // holder → expiry
		live := func() int64 {
			n := int64(0)
			for _, exp := range model {
				if exp.After(now) {
					n++
				}
			}
			return n
		}
		const limit = 4
		// AcquireSlot's sets and Apply's (under a scope) are apart.
		viaApply := seed%2 == 0
		for step := range 400 {
			holder := "h" + strconv.Itoa(rng.IntN(8))
			ttl := time.Duration(1+rng.IntN(30)) * time.Second
			switch rng.IntN(4) {
			case 0:
				now = now.Add(time.Duration(rng.IntN(12000)) * time.Millisecond)
			case 1, 2:
				exp, has := model[holder]
				has = has && exp.After(now)
				wantOK := has || live() < limit
				var ok bool
				var n int64
				if viaApply {
					res := make([]Result, 1)
					var err error
					ok, err = l.Apply(ctx, "s", []Op{{Kind: OpAcquireSlot, Name: "conc", Holder: holder, Limit: limit, TTL: ttl}}, res)
					if err != nil {
						t.Fatal(err)
					}
					n = res[0].Slots
				} else {
					var err error
					n, ok, err = l.AcquireSlot(ctx, "conc", holder, limit, ttl)
					if err != nil {
						t.Fatal(err)
					}
				}
				if ok {
					model[holder] = now.Add(ttl)
				}
				if ok != wantOK || n != live() {
					t.Fatalf("seed %d step %d: acquire %s (apply %v): ok %v with %d slots, want %v with %d", seed, step, holder, viaApply, ok, n, wantOK, live())
				}
			case 3:
				delete(model, holder)
				if viaApply {
					res := make([]Result, 1)
					if _, err := l.Apply(ctx, "s", []Op{{Kind: OpReleaseSlot, Name: "conc", Holder: holder}}, res); err != nil {
						t.Fatal(err)
					}
					if res[0].Slots != live() {
						t.Fatalf("seed %d step %d: release %s: %d slots, want %d", seed, step, holder, res[0].Slots, live())
					}
				} else if err := l.ReleaseSlot(ctx, "conc", holder); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkLocalSlotsInFlight is a request's concurrency slot (acquired,
// then released, through Apply as the quota engine does) with 50 other
// requests in flight, as under the load harness's 50 connections.
func BenchmarkLocalSlotsInFlight(b *testing.B) {
	ctx := context.Background()
	l := NewLocal()
	res := make([]Result, 1)
	for i := range 50 {
		if ok, err := l.Apply(ctx, "s", []Op{{Kind: OpAcquireSlot, Name: "conc", Holder: "other" + strconv.Itoa(i), Limit: 100_000, TTL: 15 * time.Minute}}, res); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	acquire := []Op{{Kind: OpAcquireSlot, Name: "conc", Holder: "me", Limit: 100_000, TTL: 15 * time.Minute}}
	release := []Op{{Kind: OpReleaseSlot, Name: "conc", Holder: "me"}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := l.Apply(ctx, "s", acquire, res); !ok || err != nil || res[0].Slots != 51 {
			b.Fatal(ok, err, res[0].Slots)
		}
		if _, err := l.Apply(ctx, "s", release, res); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInstantAfter: an expiry past the last instant there is stays the
// last one, rather than wrapping into the past (a counter added with a
// ttl of math.MaxInt64 must not be expired at once).
func TestInstantAfter(t *testing.T) {
	now := instantOf(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		d    time.Duration
		want instant
	}{
		{time.Second, now + instant(time.Second)},
		{0, now},
		{-time.Second, now - instant(time.Second)},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := now.after(tc.d); got != tc.want {
			t.Errorf("after(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	l := newLocal(func() time.Time { return time.Unix(0, int64(now)) })
	if _, err := l.Add(context.Background(), "k", 1, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if c, err := l.Get(context.Background(), "k"); err != nil || c.Value != 1 || c.TTL <= 0 {
		t.Fatalf("a counter added for ever-ish: %+v, %v", c, err)
	}
}
