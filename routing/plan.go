package routing

import (
	"math/bits"
	"time"
)

// Plan routes one request: it offers the alias's targets one at a time,
// in the policy's order, skipping the targets that are out of rotation.
// A Plan is a value, used by one goroutine and not copied once Next was
// called; its zero value offers nothing.
//
// Every target Next offers is either reported (Report) or passed over:
// the next call of Next or Close gives back what an offer held (a trial
// slot of a half-open breaker, its place among the attempts in flight),
// so a host may skip a target it cannot use (a provider that does not
// serve the endpoint) by asking for the next.
type Plan struct {
	a      *Alias
	cur    *Target
	tried  uint64 // targets offered or found out of rotation
	back   int64  // Unix ns: the soonest a target found out comes back (0: unknown)
	now    int64  // Unix ns: when the plan started, or its last attempt was reported
	group  int
	tries  int // attempts reported
	gen    uint32
	trial  bool
	stream bool
	out    bool // a target was found out of rotation
	stop   Stop
}

// Stop says why a plan offers no more targets.
type Stop uint8

// The reasons a plan stops.
const (
	// Going: the plan may offer more.
	Going Stop = iota
	// Exhausted: every target was offered.
	Exhausted
	// Unavailable: the targets not offered are out of rotation (breakers
	// open, cool-downs, trials all taken); RetryAfter says for how long.
	Unavailable
	// BudgetSpent: the alias's retry budget allows no further attempt.
	BudgetSpent
	// Done: Close was called.
	Done
)

var stopNames = [...]string{Going: "going", Exhausted: "exhausted", Unavailable: "unavailable", BudgetSpent: "budget_spent", Done: "done"}

// String names the reason.
func (s Stop) String() string {
	if int(s) < len(stopNames) {
		return stopNames[s]
	}
	return "unknown"
}

// Plan starts routing one request to the alias (see Router.Plan).
func (a *Alias) Plan(stream bool) Plan {
	now := a.r.now()
	a.budget.request(now)
	return Plan{a: a, stream: stream, now: now}
}

// Next offers the next target to try, or reports false when there is none
// (Stop says why). A target it offers after a reported attempt is a retry,
// counted against the alias's retry budget: call it again only after an
// attempt whose Result asks for a retry, or to pass over the target it
// offered last.
func (p *Plan) Next() (*Target, bool) {
	if p.a == nil || p.stop != Going {
		return nil, false
	}
	p.pass()
	now := p.now // nothing took long since: the plan started, or Report read the clock
	for p.group < len(p.a.groups) {
		i, g, isTrial, ok := p.pick(&p.a.groups[p.group], now)
		if !ok {
			p.group++
			continue
		}
		t := p.a.targets[i]
		if p.tries > 0 && !p.a.budget.withdraw(now) {
			if isTrial {
				t.releaseTrial(g)
			}
			p.stop = BudgetSpent
			return nil, false
		}
		p.tried |= 1 << i
		p.cur, p.gen, p.trial = t, g, isTrial
		t.h.inflight.Add(1)
		return t, true
	}
	p.stop = Exhausted
	if p.out {
		p.stop = Unavailable
	}
	return nil, false
}

// pick chooses the next target of group g per the alias's policy, taking
// a trial slot when its breaker is half-open.
func (p *Plan) pick(g *group, now int64) (i uint8, gen uint32, isTrial, ok bool) {
	a := p.a
	var cands [MaxTargets]uint8
	var trials uint64
	n := 0
	for _, i := range g.order {
		if p.tried&(1<<i) != 0 {
			continue
		}
		av, back := a.targets[i].check(now)
		switch av {
		case out:
			p.markOut(i, back)
			continue
		case trial:
			trials |= 1 << i
		}
		if a.policy == Ordered || a.policy == LowestCost {
			// The first that is in rotation; the order is fixed.
			if gen, ok := p.take(i, trials, now); ok {
				return i, gen, trials&(1<<i) != 0, true
			}
			continue
		}
		cands[n] = i
		n++
	}
	for n > 0 {
		k := p.choose(cands[:n])
		i := cands[k]
		if gen, ok := p.take(i, trials, now); ok {
			return i, gen, trials&(1<<i) != 0, true
		}
		cands[k] = cands[n-1]
		n--
	}
	return 0, 0, false, false
}

// take claims target i: a trial slot when it is half-open (trials). A
// trial taken by others meanwhile makes it out of rotation.
func (p *Plan) take(i uint8, trials uint64, now int64) (uint32, bool) {
	if trials&(1<<i) == 0 {
		return 0, true
	}
	g, ok := p.a.targets[i].takeTrial(now)
	if !ok {
		p.markOut(i, now+int64(time.Second))
	}
	return g, ok
}

// markOut notes that target i is out of rotation until back (0: unknown).
func (p *Plan) markOut(i uint8, back int64) {
	p.tried |= 1 << i
	p.out = true
	if back > 0 && (p.back == 0 || back < p.back) {
		p.back = back
	}
}

// choose picks one of the candidates (indexes of the alias's targets) by
// the weighted or the latency policy and returns its position.
func (p *Plan) choose(cands []uint8) int {
	a := p.a
	if len(cands) == 1 {
		return 0
	}
	if a.policy == Weighted {
		var total uint64
		for _, i := range cands {
			total += a.weights[i]
		}
		x := below(a.r.rand(), total)
		for k, i := range cands {
			if x < a.weights[i] {
				return k
			}
			x -= a.weights[i]
		}
		return len(cands) - 1
	}
	// Power of two random choices: the better of two drawn at random.
	n := uint64(len(cands))
	x := a.r.rand()
	k1 := int(below32(uint32(x), n))
	k2 := int(below32(uint32(x>>32), n-1))
	if k2 >= k1 {
		k2++
	}
	if p.score(cands[k2]) < p.score(cands[k1]) {
		return k2
	}
	return k1
}

// Random numbers map to [0, n) by a multiplication rather than a
// division, which takes longer: the high half of x·n for 64 random bits,
// or of x·n >> 32 for 32. Each value comes out all but equally often (n is
// small beside 2³²).
func below(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

func below32(x uint32, n uint64) uint64 { return uint64(x) * n >> 32 }

// score is what the latency policy minimises: the target's average
// latency of the plan's kind. A target with no sample yet scores 0, so
// it gets tried. (Attempts in flight do not weigh in: a provider's
// streams stay open for as long as the answer takes, which says nothing
// of how fast it answers the next request.)
func (p *Plan) score(i uint8) float64 {
	return p.a.targets[i].averageOf(p.stream)
}

// pass gives back what an offer not reported holds.
func (p *Plan) pass() {
	t := p.cur
	if t == nil {
		return
	}
	p.cur = nil
	t.h.inflight.Add(-1)
	if p.trial {
		t.releaseTrial(p.gen)
	}
}

// Report tells the router what became of the attempt at the target Next
// offered last, once the attempt is over: a failure before the answer
// started as soon as it happens (and then the host may ask for the next
// target), a stream when it has ended — well (Answered, with its TTFB),
// or broken after its first byte (Reset, Stalled, Malformed; no retry
// then, since the client has part of the answer). A 429, or a 503 or 529
// with a time to come back, starts a cool-down (Cooldown reads the
// headers; capped by CooldownConfig.Max); failures count for the
// target's breaker; successes close a half-open one and add to the
// latency average.
func (p *Plan) Report(res Result) {
	t := p.cur
	if t == nil {
		return
	}
	p.cur = nil
	p.tries++
	t.h.inflight.Add(-1)
	now := p.a.r.now()
	p.now = now
	switch res.outcome() {
	case succeeded:
		t.succeed(now, p.trial, p.gen, res.latency(p.stream), p.stream)
	case failed:
		t.fail(now, p.trial, p.gen)
	case rateLimited:
		t.h.requests.Add(1) // an attempt, neither success nor failure
		fallthrough
	default:
		if p.trial {
			t.releaseTrial(p.gen)
		}
	}
	if res.cooling() {
		t.coolFrom(now, res)
	}
}

// coolFrom starts the cool-down a 429, 503 or 529 asks for: a 429 always
// cools (Cooldown.Default when its headers say nothing usable); a 503 or
// 529 only when its headers say for how long.
func (t *Target) coolFrom(now int64, res Result) {
	d, ok := Cooldown(res.Header, time.Unix(0, now))
	why := ReasonRateLimited
	switch {
	case res.Status != 429 && !ok:
		return
	case res.Status != 429:
		why = ReasonOverloaded
	case !ok:
		d = t.r.cfg.Cooldown.Default
	}
	until, started := t.cool(now, d)
	if !started && until <= t.h.sharedCool.Load()+int64(time.Second) {
		return // in force already, and the others know
	}
	t.h.sharedCool.Store(until)
	t.r.changed(Change{Target: t, From: State(t.h.state.Load()), To: State(t.h.state.Load()),
		Cooldown: true, Until: time.Unix(0, until), Reason: why})
}

// Close ends the plan, giving back what an offer not reported holds.
func (p *Plan) Close() {
	p.pass()
	if p.stop == Going {
		p.stop = Done
	}
}

// Stop says why Next offered nothing more; Going while it may.
func (p *Plan) Stop() Stop { return p.stop }

// Attempts is the number of attempts reported.
func (p *Plan) Attempts() int { return p.tries }

// RetryAfter is, when targets were found out of rotation, how long until
// the first of them comes back (at least a second when unknown); 0 when
// none was out.
func (p *Plan) RetryAfter() time.Duration {
	if !p.out {
		return 0
	}
	if p.back == 0 {
		return time.Second
	}
	return max(time.Duration(p.back-p.a.r.now()), 0)
}
