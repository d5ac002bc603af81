package integration

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
)

// The process tests of leases (docs/design/leases.md): three instances on
// one redis-server, under limits large enough to be leased to each
// instance in slices. What they show is what docs/limits-and-usage.md
// ("Tolerances across instances") states: a leased limit is never passed,
// a refusal comes at most (N-1) slices short of it, most requests cost
// Redis nothing; an instance killed holding slices gives them back by
// expiry; Redis hung while settlements are on their way counts them once.

// share is what instance.Caddyfile's leases let one slice hold of a
// limit: the default, 1/16.
const share = 16

// flood sends chat requests of body with secret from workers goroutines
// per instance until stop is closed, and returns their answers; each,
// when not nil, sees every answer as it comes.
func flood(ins []*instance, secret string, workers int, body func() string, stop <-chan struct{}, each func(*shot)) []shot {
	var mu sync.Mutex
	var out []shot
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for i, in := range ins {
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					s := shot{in: i}
					req, _ := http.NewRequest(http.MethodPost, in.httpURL+"/v1/chat/completions", strings.NewReader(body()))
					req.Header.Set("Authorization", "Bearer "+secret)
					req.Header.Set("Content-Type", "application/json")
					res, err := client.Do(req)
					if err != nil {
						s.err = err
					} else {
						b, err := io.ReadAll(res.Body)
						res.Body.Close()
						s.status, s.body, s.header, s.err = res.StatusCode, string(b), res.Header, err
					}
					mu.Lock()
					if each != nil {
						each(&s)
					}
					out = append(out, s)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return out
}

// untilRefused closes the channel it returns once refused reports n
// refusals, or after limit.
func untilRefused(refused *atomic.Int64, n int64, limit time.Duration) <-chan struct{} {
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for end := time.Now().Add(limit); time.Now().Before(end) && refused.Load() < n; {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return stop
}

// evalCalls is how many scripts redis-server has run: Lua through
// EVALSHA and EVAL, the shared state's and the storage's.
func evalCalls(t *testing.T, c *redisCluster) int64 {
	t.Helper()
	info, err := redisClient(t, c.redis.Addr).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd+"calls="); ok {
				v, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
				n += v
			}
		}
	}
	return n
}

// budgetStatus reads on in the budget of the key id: spent and reserved.
func budgetStatus(t *testing.T, in *instance, id string) (spent, reserved pricing.Money) {
	t.Helper()
	status, body, err := adminRequest(http.MethodGet, in.adminURL+"/modelgate/keys/"+id+"/usage?days=1", "")
	if err != nil || status != 200 {
		t.Fatalf("the key's status on %s: %d %s %v", in.name, status, body, err)
	}
	b := gjson.Get(body, "status.key.budget")
	spent, err1 := pricing.ParseMoney(b.Get("spent_usd").Str)
	reserved, err2 := pricing.ParseMoney(b.Get("reserved_usd").Str)
	if err1 != nil || err2 != nil {
		t.Fatalf("the key's budget on %s: %s", in.name, body)
	}
	return spent, reserved
}

// TestProcessRedisLeases: three instances on one redis-server, each sent
// requests of one key at once, under a limit large enough to be leased.
//
//   - requests per minute (1,200: a slice is up to 75): never passed, the
//     first refusal at most two slices short, the providers reached by the
//     admitted alone, and under one script per request;
//   - a budget ($0.05 a day, requests whose estimates cover their cost):
//     never passed, reached within two slices; once the instances are
//     idle every instance shows the spend the answers add up to, nothing
//     reserved, and the usage records count every answer once;
//   - concurrent requests (48): never more in flight, as the providers
//     saw them.
func TestProcessRedisLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m")

	t.Run("requests per minute", func(t *testing.T) {
		const limit = 1200
		secret, _ := limitedKey(t, c, "leased-rpm", "leases", `,"limits":{"requests_per_minute":1200}`)
		oneMinute(40 * time.Second)
		before, calls := c.sent(), evalCalls(t, c)
		var refused atomic.Int64
		var firstRefusal atomic.Int64 // admitted when the first refusal came
		firstRefusal.Store(-1)
		var admitted atomic.Int64
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && refused.Load() < 150; {
				time.Sleep(5 * time.Millisecond)
			}
		}()
		shots := flood(c.ins, secret, 4, func() string { return chatBody("oa/gpt-4o-mini", "leased", 5) }, stop,
			func(s *shot) {
				switch s.status {
				case 200:
					admitted.Add(1)
				case 429:
					if refused.Add(1) == 1 {
						firstRefusal.Store(admitted.Load())
					}
				}
			})
		scripts := evalCalls(t, c) - calls
		var got, no int
		for _, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("a request: %v", s.err)
			case s.status == 200:
				got++
			case s.status == 429 && gjson.Get(s.body, "error.code").Str == "rate_limit_exceeded":
				no++
			default:
				t.Errorf("a request on %s: %d %s", c.ins[s.in].name, s.status, s.body)
			}
		}
		t.Logf("rpm %d on 3 instances (a slice up to %d): admitted %d, refused %d; the first refusal after %d admitted; %d scripts on Redis (%.3f a request)",
			limit, limit/share, got, no, firstRefusal.Load(), scripts, float64(scripts)/float64(len(shots)))
		if got > limit {
			t.Errorf("admitted %d requests in a minute under a limit of %d", got, limit)
		}
		if f := firstRefusal.Load(); f < limit-2*limit/share-3 {
			t.Errorf("the first refusal came after %d admitted: more than two slices of %d short of %d", f, limit/share, limit)
		}
		if sent := c.sent() - before; sent != got {
			t.Errorf("the providers received %d requests for %d admitted", sent, got)
		}
		// Refusals cost a script each; the admitted, most of them none.
		if float64(scripts-int64(no)) > 0.25*float64(got) {
			t.Errorf("%d scripts on Redis for %d admitted and %d refused requests: the limit was not leased", scripts, got, no)
		}
	})

	t.Run("a budget", func(t *testing.T) {
		const budget = 5 * pricing.Cent
		secret, id := limitedKey(t, c, "leased-budget", "leases", `,"budget":{"usd":"0.05","period":"day"}`)
		var refused atomic.Int64
		shots := flood(c.ins, secret, 8, func() string { return chatBody(pricedModel, "spend it", 20) }, untilRefused(&refused, 60, 60*time.Second),
			func(s *shot) {
				if s.status == 429 {
					refused.Add(1)
				}
			})
		var spent, est pricing.Money
		var answers tally
		for _, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("a request: %v", s.err)
			case s.status == 200:
				answers.add(pricedModel, s.body)
				spent += pricedCost(s.body)
			case s.status == 429 && gjson.Get(s.body, "error.code").Str == "insufficient_quota":
				if m := estimatedAt.FindStringSubmatch(gjson.Get(s.body, "error.message").Str); m != nil {
					est, _ = pricing.ParseMoney(m[1])
				}
			default:
				t.Errorf("a request on %s: %d %s", c.ins[s.in].name, s.status, s.body)
			}
		}
		slice := budget / share
		t.Logf("budget $%s on 3 instances (a slice up to $%s, a request estimated at $%s): admitted %d, refused %d; spent $%s",
			budget, slice, est, answers.requests, refused.Load(), spent)
		if spent > budget {
			t.Errorf("spent $%s of a $%s budget, with every estimate above its cost", spent, budget)
		}
		if spent < budget-2*slice-2*est {
			t.Errorf("spent $%s of a $%s budget when refused: more than two slices of $%s short", spent, budget, slice)
		}
		// Idle, the instances give their slices back: every one shows
		// the spend, nothing reserved.
		deadline := time.Now().Add(10 * time.Second)
		for _, in := range c.ins {
			for {
				got, reserved := budgetStatus(t, in, id)
				if got == spent && reserved == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("on %s the budget shows $%s spent, $%s reserved; want $%s, nothing reserved", in.name, got, reserved, spent)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		waitUsage(t, c.ins, map[string]*tally{id: &answers}, 25*time.Second)
	})

	t.Run("concurrent requests", func(t *testing.T) {
		const limit = 48
		const slow = 300 * time.Millisecond
		secret, _ := limitedKey(t, c, "leased-conc", "leases", `,"limits":{"concurrent_requests":48}`)
		before := make([]int, len(c.fakes))
		for i, f := range c.fakes {
			before[i] = len(f.Requests())
		}
		stop := make(chan struct{})
		time.AfterFunc(6*time.Second, func() { close(stop) })
		shots := flood(c.ins, secret, 24, func() string { return chatBody("oa/slow-300ms", "hold a slot", 5) }, stop, nil)
		// What the providers were working on at once: each request from
		// its arrival for the 300 ms the fake takes, which lie within
		// its admission and its settling.
		var edges []struct {
			at time.Time
			d  int
		}
		for i, f := range c.fakes {
			for _, r := range f.Requests()[before[i]:] {
				edges = append(edges, struct {
					at time.Time
					d  int
				}{r.At, 1}, struct {
					at time.Time
					d  int
				}{r.At.Add(slow - 5*time.Millisecond), -1})
			}
		}
		slices.SortFunc(edges, func(a, b struct {
			at time.Time
			d  int
		}) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.d - b.d // an end before a start at the same time
		})
		most, cur := 0, 0
		for _, e := range edges {
			cur += e.d
			most = max(most, cur)
		}
		var ok, no int
		for _, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("a request: %v", s.err)
			case s.status == 200:
				ok++
			case s.status == 429:
				no++
			default:
				t.Errorf("a request on %s: %d %s", c.ins[s.in].name, s.status, s.body)
			}
		}
		t.Logf("%d concurrent allowed, 72 senders on 3 instances for 6s: %d admitted, %d refused; the providers worked on %d at most at once",
			limit, ok, no, most)
		if most > limit {
			t.Errorf("the providers worked on %d requests at once under a limit of %d", most, limit)
		}
		if ok == 0 || no == 0 {
			t.Errorf("admitted %d, refused %d: the limit should admit some and refuse some", ok, no)
		}
	})
}
