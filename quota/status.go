package quota

import (
	"context"
	"errors"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/state"
)

// Status is where a key and its owner stand now against their limits and
// budgets, for the key settings page.
type Status struct {
	Key, Owner SubjectStatus
}

// SubjectStatus is where a key or an owner stands now.
type SubjectStatus struct {
	// Requests and Tokens are the rate windows now (Limit 0: none).
	Requests, Tokens RateLimit
	// Budget is the budget's period now (Amount 0: none).
	Budget BudgetStatus
}

// BudgetStatus is a budget's current period.
type BudgetStatus struct {
	Budget
	// Spent is what the requests of the period that are over cost;
	// Reserved what the requests in flight hold; Left what remains of
	// the budget (not below 0).
	Spent, Reserved, Left pricing.Money
	// Resets is when the period ends; zero for a total budget.
	Resets time.Time
}

// Status reads where s stands, counting nothing. A budget counter not
// used yet in this period (or since a start) is seeded from the usage
// records, as Admit would.
func (q *Quota) Status(ctx context.Context, s Subjects) (Status, error) {
	if s.Key.ID == "" {
		return Status{}, errors.New("quota: a status without a key id")
	}
	if err := checkBudgets(&s); err != nil {
		return Status{}, err
	}
	at := q.now()
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	plans := q.plans(sc, &s, Ask{}, at)
	for attempt := 0; ; attempt++ {
		ops := sc.ops[:0]
		add := func(op state.Op) int {
			ops = append(ops, op)
			return len(ops) - 1
		}
		for i := range plans {
			p := &plans[i]
			p.rpm, p.tpm, p.spent, p.rs = -1, -1, -1, -1
			if l := p.s.Limits.RequestsPerMinute; l > 0 {
				p.rpm = add(state.Op{Kind: state.OpTake, Name: p.n.rpm, Limit: l, Window: window, At: at})
			}
			if l := p.s.Limits.TokensPerMinute; l > 0 {
				p.tpm = add(state.Op{Kind: state.OpTake, Name: p.n.tpm, Limit: l, Window: window, At: at})
			}
			if p.b != nil {
				if p.seeded {
					p.spent = add(state.Op{Kind: state.OpInit, Name: p.b.spent, N: int64(p.seed), TTL: q.spentTTL(p.b, at)})
				} else {
					p.spent = add(state.Op{Kind: state.OpExists, Name: p.b.spent})
				}
				// What is reserved: the requests in flight, and the
				// slices instances hold when leasing.
				p.rs = add(state.Op{Kind: state.OpGet, Name: p.b.held, With: p.b.with[1:]})
			}
		}
		if len(ops) == 0 {
			return Status{}, nil
		}
		ok, err := q.st.Apply(ctx, plans[len(plans)-1].n.scope, ops, sc.res[:len(ops)])
		if err != nil {
			return Status{}, err
		}
		if !ok {
			// Only OpExists can refuse here: a counter to seed.
			if attempt == 2 {
				return Status{}, errors.New("quota: budget counters vanished while being seeded, three times")
			}
			for i := range plans {
				p := &plans[i]
				if p.spent >= 0 && !p.seeded && sc.res[p.spent].Missing {
					if p.seed, err = q.seed(ctx, p); err != nil {
						return Status{}, err
					}
					p.seeded = true
				}
			}
			continue
		}
		var st Status
		for i := range plans {
			p := &plans[i]
			ss := &st.Key
			if p.kind == KindOwner {
				ss = &st.Owner
			}
			if p.rpm >= 0 {
				t := sc.res[p.rpm].Taken
				ss.Requests = RateLimit{Limit: t.Limit, Remaining: t.Remaining, Reset: t.Reset}
			}
			if p.tpm >= 0 {
				t := sc.res[p.tpm].Taken
				ss.Tokens = RateLimit{Limit: t.Limit, Remaining: t.Remaining, Reset: t.Reset}
			}
			if p.b != nil {
				b := BudgetStatus{Budget: p.s.Budget, Spent: pricing.Money(sc.res[p.spent].Value),
					Reserved: pricing.Money(sc.res[p.rs].Total), Resets: p.b.end}
				b.Left = max(0, b.Amount-b.Spent-b.Reserved)
				ss.Budget = b
			}
		}
		return st, nil
	}
}
