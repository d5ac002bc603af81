package routing

import (
	"testing"
	"time"
)

// BenchmarkPlanReport is the router's cost per request in the steady
// state: Plan, Next, Report of a success, Close.
func BenchmarkPlanReport(b *testing.B) {
	for _, pol := range []Policy{Ordered, Weighted, LowestLatency, LowestCost} {
		b.Run(pol.String(), func(b *testing.B) {
			r, err := New(Config{Aliases: []AliasConfig{alias("a", pol, 3)}},
				Options{Cost: func(p, _ string) (float64, bool) { return float64(p[1]), true }})
			if err != nil {
				b.Fatal(err)
			}
			res := Result{Kind: Answered, Status: 200, Latency: 300 * time.Millisecond}
			b.ReportAllocs()
			for b.Loop() {
				p, _ := r.Plan("a", false)
				if _, ok := p.Next(); !ok {
					b.Fatal("no target")
				}
				p.Report(res)
				p.Close()
			}
		})
	}
}

// BenchmarkPlanReportFixedClock is BenchmarkPlanReport/latency on a clock
// that does not move: the router's own work, without the two readings
// of the system clock a request makes (Plan and Report).
func BenchmarkPlanReportFixedClock(b *testing.B) {
	at := time.Now()
	r, err := New(Config{Aliases: []AliasConfig{alias("a", LowestLatency, 3)}}, Options{Now: func() time.Time { return at }})
	if err != nil {
		b.Fatal(err)
	}
	res := Result{Kind: Answered, Status: 200, Latency: 300 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		p, _ := r.Plan("a", false)
		p.Next()
		p.Report(res)
		p.Close()
	}
}

// BenchmarkPlanReportParallel is the same from every core at once, on
// one alias: the contention of the shared counters.
func BenchmarkPlanReportParallel(b *testing.B) {
	r, err := New(Config{Aliases: []AliasConfig{alias("a", LowestLatency, 3)}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	res := Result{Kind: Answered, Status: 200, Latency: 300 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := r.Plan("a", false)
			p.Next()
			p.Report(res)
			p.Close()
		}
	})
}

// BenchmarkFailover is a request whose primary is open: skipped without
// an attempt, the secondary serves.
func BenchmarkFailover(b *testing.B) {
	r, err := New(Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Hour},
		Aliases: []AliasConfig{alias("a", Ordered, 2)}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := r.Plan("a", false)
	p.Next()
	p.Report(Result{Kind: Refused})
	p.Close()
	res := Result{Kind: Answered, Status: 200, Latency: 300 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		p, _ := r.Plan("a", false)
		if t, _ := p.Next(); t.Key() != "p1/m" {
			b.Fatal(t.Key())
		}
		p.Report(res)
		p.Close()
	}
}
