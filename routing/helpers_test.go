package routing

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// clock is a fake clock tests move by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := new(clock)
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// seeded is a random source with a fixed seed, safe for concurrent use.
func seeded(seed uint64) func() uint64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Uint64()
	}
}

// testRouter builds a router on a fake clock and a seeded source; opts
// fills in what it leaves unset.
func testRouter(t testing.TB, cfg Config, opts ...Options) (*Router, *clock) {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c := newClock()
	if o.Now == nil {
		o.Now = c.Now
	}
	if o.Rand == nil {
		o.Rand = seeded(1)
	}
	r, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// alias is a config of one alias of targets "p<i>/m" in order.
func alias(name string, policy Policy, n int) AliasConfig {
	a := AliasConfig{Name: name, Policy: policy}
	for i := range n {
		a.Targets = append(a.Targets, TargetConfig{Provider: "p" + string(rune('0'+i)), Model: "m"})
	}
	return a
}

var (
	ok200   = Result{Kind: Answered, Status: 200, Latency: 100 * time.Millisecond}
	fail500 = Result{Kind: Answered, Status: 500}
	refused = Result{Kind: Refused}
)

func rateLimit(h ...string) Result {
	hdr := http.Header{}
	for i := 0; i+1 < len(h); i += 2 {
		hdr.Add(h[i], h[i+1])
	}
	return Result{Kind: Answered, Status: 429, Header: hdr}
}

// attempt runs one request through alias: each offered target gets the
// result outcome returns for it, until one does not call for a retry. It
// returns the targets offered, in order, and the plan's stop.
func attempt(t testing.TB, r *Router, name string, outcome func(*Target) Result) ([]string, Stop) {
	t.Helper()
	p, ok := r.Plan(name, false)
	if !ok {
		t.Fatalf("no alias %s", name)
	}
	defer p.Close()
	var tried []string
	for tg, ok := p.Next(); ok; tg, ok = p.Next() {
		tried = append(tried, tg.Key())
		res := outcome(tg)
		p.Report(res)
		if !res.Retry() {
			return tried, p.Stop()
		}
	}
	return tried, p.Stop()
}

// always answers every target with res.
func always(res Result) func(*Target) Result { return func(*Target) Result { return res } }

// failing answers the targets in dead with res, the others with 200.
func failing(res Result, dead ...string) func(*Target) Result {
	return func(t *Target) Result {
		for _, d := range dead {
			if t.Key() == d {
				return res
			}
		}
		return ok200
	}
}

func healthOf(r *Router, key string) TargetHealth {
	for _, th := range r.Health().Targets {
		if th.Target == key {
			return th
		}
	}
	panic("no target " + key)
}

func zapNop() *zap.Logger { return zap.NewNop() }
