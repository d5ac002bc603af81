package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/routing"
)

// BenchmarkDeadPrimary is the cost of a dead primary target to the
// requests of an alias (a dead primary, a working secondary), under load
// (concurrent requests), with the circuit breakers off — every request
// tries the primary first, as before the routing engine — and on (the
// defaults): the latency of a request, p50 and p99, and the requests the
// dead target is sent in a minute. The router's clock moves a minute
// over the b.N requests (each request moves it by a minute/b.N), so
// that -benchtime 2000x is a load of 2000 requests a minute as the
// breakers see it; the requests themselves run as fast as they can, 16 at
// a time. The primary is dead two ways: its
// connection is refused (a real dial to a closed port), or it does not
// answer until a 20 ms response-header timeout. "healthy" is the
// reference: a working primary.
//
//	go test -run '^$' -bench BenchmarkDeadPrimary -benchtime 2000x ./gateway/
func BenchmarkDeadPrimary(b *testing.B) {
	closed := closedAddr(b)
	refusedDial := func(ctx context.Context, _ bool, _ http.ResponseWriter) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", closed)
		if err == nil {
			_ = c.Close()
			return fmt.Errorf("%s answered", closed)
		}
		return err
	}
	timeout := func(ctx context.Context, _ bool, _ http.ResponseWriter) error {
		select {
		case <-time.After(20 * time.Millisecond):
			return fmt.Errorf("%w: no response headers within 20ms", ErrTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, dead := range []struct {
		name string
		fn   func(context.Context, bool, http.ResponseWriter) error
	}{
		{"healthy", nil},
		{"refused", refusedDial},
		{"timeout", timeout},
	} {
		for _, breakers := range []bool{false, true} {
			name := dead.name + "/breakers_off"
			if breakers {
				name = dead.name + "/breakers_on"
			}
			if dead.fn == nil && breakers {
				continue
			}
			b.Run(name, func(b *testing.B) {
				cfg := routing.Config{Breaker: routing.BreakerConfig{Off: !breakers}, RetryBudget: routing.BudgetConfig{Off: true}}
				r := newRouted(b, cfg, nil)
				var clock atomic.Int64
				clock.Store(time.Now().UnixNano())
				rt, err := routing.New(routing.Config{Breaker: cfg.Breaker, RetryBudget: cfg.RetryBudget,
					Aliases: []routing.AliasConfig{{Name: "smart", Targets: []routing.TargetConfig{{Provider: "a", Model: "m"}, {Provider: "b", Model: "m"}}}}},
					routing.Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
				if err != nil {
					b.Fatal(err)
				}
				r.router, r.g.router = rt, rt
				if dead.fn != nil {
					r.ups["a"].set(dead.fn)
				}
				var mu sync.Mutex
				lat := make([]time.Duration, 0, b.N)
				step := int64(time.Minute) / int64(b.N)
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					mine := make([]time.Duration, 0, 64)
					for pb.Next() {
						clock.Add(step)
						t0 := time.Now()
						if o, _ := r.chat(b, "smart", false); o.Status != 200 {
							b.Errorf("status %d: %s", o.Status, o.Body)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) == 0 {
					return
				}
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				if dead.fn != nil {
					b.ReportMetric(float64(r.ups["a"].calls.Load()), "dead-req/min")
				}
			})
		}
	}
}

// closedAddr is a local address nothing listens on: a port listened on
// and closed again.
func closedAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
