package quota

import (
	"context"
	"errors"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/state"
)

// Spend counts cost as spent from the budgets of s, without a
// reservation to settle: what a request that was not admitted one at a
// time used (a line of a provider's own batch, which the provider ran and
// billed). It counts once per id: a Spend repeated with the same id while
// the mark of the first lives (ttl) counts nothing and reports false, so
// a caller that may repeat itself after a crash counts each request once.
// It reports true when this call counted (also for subjects without a
// budget: the mark is set all the same). A budget counter that does not
// exist is left alone: it is seeded from the usage records, which hold
// this spend once the caller has recorded it.
func (q *Quota) Spend(ctx context.Context, s Subjects, cost pricing.Money, id string, ttl time.Duration) (bool, error) {
	if s.Key.ID == "" {
		return false, errors.New("quota: a spend without a key id")
	}
	if id == "" {
		return false, errors.New("quota: a spend without an id")
	}
	if err := checkBudgets(&s); err != nil {
		return false, err
	}
	at := q.now()
	subjects := []Subject{s.Key}
	kinds := []Kind{KindKey}
	if s.Owner.ID != "" {
		subjects, kinds = append(subjects, s.Owner), append(kinds, KindOwner)
	}
	n := q.names.get(kinds[len(kinds)-1], subjects[len(subjects)-1].ID)
	scope := n.scope // the owner's, else the key's
	// The mark fences the spend: set when missing, refused (and with it
	// the whole Apply) when a Spend of id already counted.
	ops := []state.Op{{Kind: state.OpAdvance, Name: n.prefix + "/spend/" + id, N: 1, TTL: ttl}}
	if cost > 0 {
		for i, sub := range subjects {
			if sub.Budget.Amount <= 0 {
				continue
			}
			b := q.names.get(kinds[i], sub.ID).budgetAt(sub.Budget, at, q.hold, q.life())
			ops = append(ops, state.Op{Kind: state.OpAdd, Name: b.spent, Ref: &b.spentRef, N: int64(cost), IfExists: true})
		}
	}
	res := make([]state.Result, len(ops))
	return q.st.Apply(ctx, scope, ops, res)
}
