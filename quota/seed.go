package quota

import (
	"context"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/usage"
)

// seedCall is a reading of the usage records for one budget counter that
// requests of this instance share: after a restart, the first requests of
// a busy key all find its counter missing at once (and some still find it
// missing just after another request initialised it, as their Apply ran
// before). A reading is reused for seedReuse: the records it read are that
// fresh anyway (usage.Options.SpentCache), and the counter it seeds is
// initialised only if missing.
type seedCall struct {
	done chan struct{}
	at   time.Time
	v    pricing.Money
	err  error
}

const (
	// seedTimeout bounds a reading of the usage records.
	seedTimeout = 30 * time.Second
	// seedReuse is how long a reading serves again.
	seedReuse = 10 * time.Second
)

// seed returns what the subject of p spent in the budget period of p, by
// the usage records.
func (q *Quota) seed(ctx context.Context, p *plan) (pricing.Money, error) {
	if q.spender == nil {
		return 0, nil
	}
	key := p.b.spent
	now := time.Now()
	q.seedMu.Lock()
	c := q.seeds[key]
	if c != nil && !c.at.IsZero() && (now.Sub(c.at) >= seedReuse || c.err != nil) {
		c = nil
	}
	if c == nil {
		if len(q.seeds) >= 1024 {
			for k, old := range q.seeds {
				if !old.at.IsZero() && now.Sub(old.at) >= seedReuse {
					delete(q.seeds, k)
				}
			}
		}
		c = &seedCall{done: make(chan struct{})}
		q.seeds[key] = c
		q.seedMu.Unlock()
		by := usage.ByKey
		if p.kind == KindOwner {
			by = usage.ByOwner
		}
		// Not the request's context: the others wait for this reading.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), seedTimeout)
		v, err := q.spender.Spent(sctx, by, p.s.ID, p.b.start, p.b.end)
		cancel()
		q.seedMu.Lock()
		c.v, c.err, c.at = v, err, time.Now()
		q.seedMu.Unlock()
		close(c.done)
	} else {
		q.seedMu.Unlock()
	}
	select {
	case <-c.done:
		q.seedMu.Lock()
		defer q.seedMu.Unlock()
		return c.v, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
