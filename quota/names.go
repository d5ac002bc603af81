package quota

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/state"
)

// The state of a subject, in the state's Apply scope of the key's owner
// (or of the key, without one), so that one script reaches all of a
// request's counters on a Redis Cluster:
//
//	<s>/rpm                         requests: sliding one-minute windows
//	<s>/tpm                         tokens: sliding one-minute windows
//	<s>/conc                        concurrency slots, one per request in flight
//	<s>/spent/<period>/<amount>     the budget's settled spend (nano-dollars)
//	<s>/held/<period>/<amount>/<b>  reservations of requests admitted in bucket b
//	<s>/lease/<period>/<amount>/<l> slices of the budget leased to instances
//	                                in lease bucket l (lease.go)
//
// where <s> is "k" or "o", the length of the id, ':' and the id (so no id
// can pass for another), <period> is d2026-07-24, m2026-07 or t, and
// <amount> is the budget in nano-dollars (a changed budget starts a
// counter seeded again from the usage records). Reservation buckets are
// Hold long; a request's reservation is counted while its bucket or the
// next one is current, so at least Hold and at most twice Hold after it
// was made: a request that never settles (its instance crashed) holds its
// estimate that long, no longer.

type subjectKey struct {
	kind Kind
	id   string
}

// names are the state names of a subject, made once and kept. scope is
// the Apply scope of the requests whose owner (or ownerless key) it is.
// The Refs let the state find the counters of a name again without a
// lookup.
type names struct {
	scope                   string
	prefix, rpm, tpm, conc  string
	rpmRef, tpmRef, concRef state.Ref
	budget                  atomic.Pointer[budgetNames]
	// leases are what this instance holds of the subject's limits, when
	// leasing (lease.go).
	leases atomic.Pointer[subjectLeases]
}

// budgetNames are the names of a subject's budget counters at a time: its
// period, reservation bucket and, when leasing, lease bucket.
type budgetNames struct {
	period     Period
	amount     pricing.Money
	start, end time.Time // of the period; zero for total
	bucket     int64     // the current reservation bucket
	lbucket    int64     // the current lease bucket (0 without leasing)
	spent      string
	held       string // the current bucket's reservations
	// with are counted with held by a reservation: spent, the previous
	// bucket's reservations and, when leasing, the current and previous
	// lease buckets' slices.
	with []string
	// leaseBase is the name of the lease bucket counters but their
	// number; lease the current one's. leaseWith are counted with lease
	// by a grant of a slice: spent, the current and previous
	// reservations, the previous lease bucket. Empty without leasing.
	leaseBase, lease string
	leaseWith        []string
	spentRef         state.Ref
	heldRef          state.Ref
}

// nameCache keeps the names of the subjects seen, so that a request
// builds no string. It forgets everything when it grows past maxNames.
type nameCache struct {
	mu sync.RWMutex
	m  map[subjectKey]*names
}

const maxNames = 1 << 16

func (c *nameCache) get(kind Kind, id string) *names {
	k := subjectKey{kind, id}
	c.mu.RLock()
	n := c.m[k]
	c.mu.RUnlock()
	if n != nil {
		return n
	}
	letter := "k"
	if kind == KindOwner {
		letter = "o"
	}
	p := letter + strconv.Itoa(len(id)) + ":" + id
	n = &names{scope: letter + ":" + id, prefix: p, rpm: p + "/rpm", tpm: p + "/tpm", conc: p + "/conc"}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxNames {
		c.m = make(map[subjectKey]*names)
	}
	if have := c.m[k]; have != nil {
		n = have
	} else {
		c.m[k] = n
	}
	c.mu.Unlock()
	return n
}

// budgetAt returns the names of n's budget b at the time at, with
// reservation buckets hold long and, when life > 0 (leasing), lease
// buckets life long.
func (n *names) budgetAt(b Budget, at time.Time, hold, life time.Duration) *budgetNames {
	ms := at.UnixMilli()
	bucket, lbucket := ms/hold.Milliseconds(), int64(0)
	if life > 0 {
		lbucket = ms / life.Milliseconds()
	}
	cur := n.budget.Load()
	if cur != nil && cur.period == b.Period && cur.amount == b.Amount && cur.bucket == bucket && cur.lbucket == lbucket &&
		(cur.leaseBase != "") == (life > 0) && (cur.start.IsZero() || !at.Before(cur.start) && at.Before(cur.end)) {
		return cur
	}
	id, start, end := periodOf(b.Period, at)
	base := "/" + id + "/" + strconv.FormatInt(int64(b.Amount), 10)
	bn := &budgetNames{period: b.Period, amount: b.Amount, start: start, end: end, bucket: bucket, lbucket: lbucket,
		spent: n.prefix + "/spent" + base}
	heldBase := n.prefix + "/held" + base + "/"
	bn.held = heldBase + strconv.FormatInt(bucket, 10)
	prevHeld := heldBase + strconv.FormatInt(bucket-1, 10)
	bn.with = []string{bn.spent, prevHeld}
	if life > 0 {
		bn.leaseBase = n.prefix + "/lease" + base + "/"
		bn.lease = bn.leaseBase + strconv.FormatInt(lbucket, 10)
		prevLease := bn.leaseBase + strconv.FormatInt(lbucket-1, 10)
		bn.with = append(bn.with, bn.lease, prevLease)
		bn.leaseWith = []string{bn.spent, bn.held, prevHeld, prevLease}
	}
	n.budget.Store(bn)
	return bn
}

// periodOf returns the name and the bounds of the budget period holding t
// (UTC calendar days and months; total has no bounds).
func periodOf(p Period, t time.Time) (id string, start, end time.Time) {
	t = t.UTC()
	switch p {
	case Day:
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return "d" + start.Format(time.DateOnly), start, start.AddDate(0, 0, 1)
	case Month:
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return "m" + start.Format("2006-01"), start, start.AddDate(0, 1, 0)
	}
	return "t", time.Time{}, time.Time{}
}
