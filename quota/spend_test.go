package quota_test

import (
	"testing"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
)

// TestSpend: a spend counts against the budgets of the key and its owner
// once per id, a repeat counts nothing, and a budget it spent refuses the
// next request.
func TestSpend(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		q := newQuota(t, open(t, 1)[0], nil, nil, time.Minute)
		s := quota.Subjects{
			Key:   quota.Subject{ID: "k1", Budget: quota.Budget{Amount: 10 * pricing.Dollar, Period: quota.Total}},
			Owner: quota.Subject{ID: "o1", Budget: quota.Budget{Amount: 20 * pricing.Dollar, Period: quota.Total}},
		}
		// A first request seeds the counters (Spend leaves missing ones
		// to the usage records).
		if err := admitted(t, q, s, quota.Ask{EstimatedCost: 1}).Done(bg, quota.Actual{Priced: true}); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false, false} {
			ok, err := q.Spend(bg, s, 6*pricing.Dollar, "batch_req_1", time.Hour)
			if err != nil || ok != want {
				t.Fatalf("spend %d: %v, %v; want %v", i, ok, err, want)
			}
		}
		st, err := q.Status(bg, s)
		if err != nil {
			t.Fatal(err)
		}
		if st.Key.Budget.Spent != 6*pricing.Dollar || st.Owner.Budget.Spent != 6*pricing.Dollar {
			t.Fatalf("spent %v and %v, want 6 each", st.Key.Budget.Spent, st.Owner.Budget.Spent)
		}
		if ok, err := q.Spend(bg, s, 6*pricing.Dollar, "batch_req_2", time.Hour); !ok || err != nil {
			t.Fatalf("second id: %v, %v", ok, err)
		}
		if _, ref := admit(t, q, s, quota.Ask{EstimatedCost: 1}); ref == nil || ref.Limit != quota.LimitBudget {
			t.Fatalf("a spent budget admitted a request: %v", ref)
		}
	})
}
