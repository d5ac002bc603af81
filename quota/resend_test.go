package quota_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
)

// losingState fails Applies as told: the next lose of them are applied,
// then answered with an error (Redis ran the script; its answer was lost
// to a timeout or a cancelled context), the next fail answered with an
// error without being applied (the command never reached Redis).
type losingState struct {
	state.State
	lose, fail atomic.Int64
}

func (s *losingState) Apply(ctx context.Context, scope string, ops []state.Op, res []state.Result) (bool, error) {
	if s.fail.Add(-1) >= 0 {
		return false, fmt.Errorf("%w: not sent", state.ErrUnavailable)
	}
	ok, err := s.State.Apply(ctx, scope, ops, res)
	if err == nil && s.lose.Add(-1) >= 0 {
		return false, fmt.Errorf("%w: the answer was lost", state.ErrUnavailable)
	}
	return ok, err
}

// TestLostAnswers: on a shared state, an admission or a settlement whose
// Apply failed counts exactly once in the end, whether the state applied
// it or not: an admission it applied all the same is undone (its
// reservation and its concurrency slot given back, not held until they
// expire), one it did not apply is not undone (nothing else's
// reservation is taken), and a settlement is sent again until the state
// answers, its spend counted once.
func TestLostAnswers(t *testing.T) {
	const estimate, cost = 10 * pricing.Cent, 7 * pricing.Cent
	s := quota.Subjects{Key: withLimits(withBudget(key("k"), dollar, quota.Month), quota.Limits{Concurrent: 2})}
	ask := quota.Ask{Rate: true, EstimatedCost: estimate}
	cases := []struct {
		name string
		// admitted and settled: what the lost Apply was.
		admission, applied bool
	}{
		{"an admission applied, its answer lost", true, true},
		{"an admission not applied", true, false},
		{"a settlement applied, its answer lost", false, true},
		{"a settlement not applied", false, false},
	}
	bothStates(t, func(t *testing.T, open opener) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				st := &losingState{State: open(t, 1)[0]}
				q, err := quota.New(quota.Config{State: st, Now: newClock(t0).Now, Shared: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = q.Stop(bg) })
				// Another request in flight, whose reservation and slot
				// nothing but its own Done may give back.
				other := admitted(t, q, s, ask)
				lose := &st.fail
				if c.applied {
					lose = &st.lose
				}
				var spent pricing.Money
				if c.admission {
					lose.Store(1)
					if adm, ref, err := q.Admit(bg, s, ask); err == nil {
						t.Fatalf("the lost admission: %v, %v", adm, ref)
					}
				} else {
					adm := admitted(t, q, s, ask)
					lose.Store(1)
					if err := adm.Done(bg, quota.Actual{Cost: cost, Priced: true}); err == nil {
						t.Fatal("the lost settlement reported no error")
					}
					spent = cost
				}
				// The state answers again: within a few rounds of sending
				// again, only the other request is reserved, and its slot
				// the only one taken.
				deadline := time.Now().Add(10 * time.Second)
				for {
					b := status(t, q, s).Key.Budget
					if b.Spent == spent && b.Reserved == estimate {
						break
					}
					if time.Now().After(deadline) || b.Spent > spent || b.Reserved < estimate {
						t.Fatalf("spent $%s, reserved $%s; want $%s spent, $%s reserved (the other request's)", b.Spent, b.Reserved, spent, estimate)
					}
					time.Sleep(50 * time.Millisecond)
				}
				next := admitted(t, q, s, ask) // the second slot
				if _, ref := admit(t, q, s, ask); ref == nil || ref.Limit != quota.LimitConcurrent {
					t.Fatalf("a third request at once: %+v", ref)
				}
				done(t, next, quota.Actual{Cost: cost, Priced: true})
				done(t, other, quota.Actual{Cost: cost, Priced: true})
				// Once nothing is left to send again, nothing counted twice.
				for q.Resending() {
					if time.Now().After(deadline) {
						t.Fatal("still sending again")
					}
					time.Sleep(50 * time.Millisecond)
				}
				if b := status(t, q, s).Key.Budget; b.Spent != spent+2*cost || b.Reserved != 0 {
					t.Fatalf("in the end: spent $%s, reserved $%s; want $%s, $0", b.Spent, b.Reserved, spent+2*cost)
				}
			})
		}
	})
}

// TestSettledAfterItsMark: a request that outlives its mark (it ran longer
// than three times Hold) is still settled: its spend counts, once.
func TestSettledAfterItsMark(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		q, err := quota.New(quota.Config{State: open(t, 1)[0], Hold: time.Second, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Stop(bg) })
		s := quota.Subjects{Key: withLimits(withBudget(key("k"), dollar, quota.Month), quota.Limits{Concurrent: 2})}
		adm := admitted(t, q, s, quota.Ask{Rate: true, EstimatedCost: 10 * pricing.Cent})
		time.Sleep(3*time.Second + 200*time.Millisecond)
		done(t, adm, quota.Actual{Cost: 7 * pricing.Cent, Priced: true})
		done(t, adm, quota.Actual{Cost: 7 * pricing.Cent, Priced: true})
		if b := status(t, q, s).Key.Budget; b.Spent != 7*pricing.Cent || b.Reserved != 0 {
			t.Fatalf("spent $%s, reserved $%s; want $0.07, $0", b.Spent, b.Reserved)
		}
	})
}
