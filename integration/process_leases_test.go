package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
)

// The process tests of leases (docs/design/leases.md): three instances on
// one redis-server, under limits large enough to be leased to each
// instance in slices. What they show is what docs/limits-and-usage.md
// ("Tolerances across instances") states: a leased limit is never passed,
// a refusal comes at most a slice per instance short of it (the others'
// unused slices and the refusing instance's refill on its way), most
// requests cost Redis nothing; an instance killed holding slices gives them back by
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
					if s.status == http.StatusTooManyRequests {
						time.Sleep(10 * time.Millisecond) // as a client backs off
					}
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
	spent, reserved, err := readBudget(in, id)
	if err != nil {
		t.Fatal(err)
	}
	return spent, reserved
}

// readBudget is budgetStatus's read, its failure returned.
func readBudget(in *instance, id string) (spent, reserved pricing.Money, err error) {
	status, body, err := adminRequest(http.MethodGet, in.adminURL+"/modelgate/keys/"+id+"/usage?days=1", "")
	if err != nil {
		return 0, 0, fmt.Errorf("the key's status on %s: %w", in.name, err)
	}
	if status != 200 {
		return 0, 0, fmt.Errorf("the key's status on %s: %d %s", in.name, status, body)
	}
	b := gjson.Get(body, "status.key.budget")
	spent, err1 := pricing.ParseMoney(b.Get("spent_usd").Str)
	reserved, err2 := pricing.ParseMoney(b.Get("reserved_usd").Str)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("the key's budget on %s: %s", in.name, body)
	}
	return spent, reserved, nil
}

// TestProcessRedisLeases: three instances on one redis-server, each sent
// requests of one key at once, under a limit large enough to be leased.
//
//   - requests per minute (6,000: a slice is up to 375): never passed, the
//     first refusal at most a slice per instance short, the providers reached by the
//     admitted alone, and one script on Redis for five requests or more;
//   - a budget ($0.05 a day, requests whose estimates cover their cost):
//     never passed, reached within a slice per instance; once the instances are
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
		const limit = 6000
		secret, _ := limitedKey(t, c, "leased-rpm", "leases", `,"limits":{"requests_per_minute":6000}`)
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
		if f := firstRefusal.Load(); f < limit-3*limit/share-12 {
			t.Errorf("the first refusal came after %d admitted: more than a slice of %d per instance short of %d", f, limit/share, limit)
		}
		if sent := c.sent() - before; sent != got {
			t.Errorf("the providers received %d requests for %d admitted", sent, got)
		}
		// Refusals cost a script each; the admitted, most of them none
		// (the first ones, before the instances know their rate, one
		// each).
		if float64(scripts-int64(no)) > 0.2*float64(got) {
			t.Errorf("%d scripts on Redis for %d admitted and %d refused requests: the limit was not leased", scripts, got, no)
		}
	})

	t.Run("a budget", func(t *testing.T) {
		const budget = 5 * pricing.Cent
		secret, id := limitedKey(t, c, "leased-budget", "leases", `,"budget":{"usd":"0.05","period":"day"}`)
		var refused atomic.Int64
		const workers = 8 // on each instance
		shots := flood(c.ins, secret, workers, func() string { return chatBody(pricedModel, "spend it", 20) }, untilRefused(&refused, 60, 60*time.Second),
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
		// Refused early by at most a slice per instance, and by what the
		// requests in flight had reserved, their estimates (the flood stops
		// at its refusals, before those answers give back what they cost
		// less than their estimates: on one instance too).
		if inFlight := pricing.Money(workers * len(c.ins)); spent < budget-3*slice-inFlight*est {
			t.Errorf("spent $%s of a $%s budget when refused: more than a slice of $%s per instance and %d requests' estimates short", spent, budget, slice, workers*len(c.ins))
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

// TestProcessRedisLeaseKill: an instance killed (SIGKILL) while it holds
// slices of a budget and of concurrency slots, with requests in flight,
// gives them back by expiry: with leases of 2 s, within twice that (and
// a second for clocks apart) nothing it held is reserved any more, and
// the other instances can take every slot it leased. (A request of its
// admitted one by one — its slices short at that moment — holds its slot
// for 15 minutes, as without leases: those are left out.)
func TestProcessRedisLeaseKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	const life = 2 * time.Second
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m", "MG_LEASE_LIFE=2s")
	a, victim := c.ins[0], c.ins[2]
	secret, id := limitedKey(t, c, "leased-kill", "leases", `,"limits":{"concurrent_requests":64},"budget":{"usd":"1","period":"day"}`)
	stop := make(chan struct{})
	done := make(chan []shot)
	go func() {
		done <- flood([]*instance{victim}, secret, 8, func() string { return chatBody(pricedModel, "hold a slice", 20) }, stop, nil)
	}()
	time.Sleep(3 * time.Second)
	victim.kill()
	died := time.Now()
	close(stop)
	shots := <-done
	ok := 0
	for _, s := range shots {
		if s.status == 200 {
			ok++
		}
	}
	// What it held of the budget: its lease buckets' counters, which
	// every reservation counts (docs/design/leases.md).
	rdb := redisClient(t, c.redis.Addr)
	leased := func() pricing.Money {
		keys, err := rdb.Keys(context.Background(), "modelgate-test:state:*:c:k*"+id+"/lease/*").Result()
		if err != nil {
			t.Fatal(err)
		}
		var sum pricing.Money
		for _, k := range keys {
			v, err := rdb.Get(context.Background(), k).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			sum += pricing.Money(v)
		}
		return sum
	}
	held := leased()
	_, reserved := budgetStatus(t, a, id)
	t.Logf("%d requests answered on the victim before it was killed; then it held $%s of the budget, $%s reserved in all", ok, held, reserved)
	if held == 0 {
		t.Fatal("the killed instance held nothing of the budget")
	}
	for leased() != 0 {
		if time.Since(died) > 2*life+2*time.Second {
			t.Fatalf("%v after the kill the budget's lease buckets still count $%s", time.Since(died).Round(time.Millisecond), leased())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, reserved = budgetStatus(t, a, id)
	t.Logf("what the killed instance held of the budget was no longer counted %v after it died (leases of %v); $%s reserved by its requests admitted one by one",
		time.Since(died).Round(10*time.Millisecond), life, reserved)
	// Every slot it leased is free again: 64 requests at once on the
	// others, but for the slots of its requests admitted one by one.
	exact := 0
	sets, err := rdb.Keys(context.Background(), "modelgate-test:state:*:s:k*"+id+"/conc").Result()
	if err != nil || len(sets) != 1 {
		t.Fatalf("the key's slot set: %v %v", sets, err)
	}
	// Live holders: an expiry (Redis's clock, in ms) still to come.
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	holders, err := rdb.ZRangeArgs(context.Background(), redis.ZRangeArgs{Key: sets[0], ByScore: true,
		Start: "(" + strconv.FormatInt(now.UnixMilli(), 10), Stop: "+inf"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if strings.Contains(h, "lease#") {
			t.Errorf("a leased slot outlived its lease: %s", h)
		} else {
			exact++
		}
	}
	var admitted, refused int
	for _, s := range burst(c.ins[:2], []string{secret}, 70, func(int) string { return chatBody(pricedModel, "every slot", 20) }) {
		switch {
		case s.err != nil:
			t.Errorf("a request: %v", s.err)
		case s.status == 200:
			admitted++
		case s.status == 429:
			refused++
		default:
			t.Errorf("a request on %s: %d %s", c.ins[s.in].name, s.status, s.body)
		}
	}
	t.Logf("70 requests at once on the two left: %d admitted, %d refused; %d slots of requests the killed instance admitted one by one",
		admitted, refused, exact)
	// Its slots are free (the holders above say so in Redis); a refusal may
	// still come short of the limit by a slice per instance left, the
	// slots one leased for the burst and did not use while the other's
	// requests were counted one by one (docs/design/leases.md): 64/16 each.
	if short := 64 - exact - admitted; short < 0 || short > 2*64/16 {
		t.Errorf("admitted %d of 70 requests at once with 64 concurrent allowed, %d held by the killed instance's requests admitted one by one",
			admitted, exact)
	}
}

// TestProcessRedisLeaseHung: redis-server hangs (SIGSTOP) while requests
// admitted from slices are answered and settled, and while more are sent:
// every request is served (from what each instance holds), the
// settlements wait, and once Redis is back they are counted once — the
// budget's spend, on every instance, is what the answers cost, as the
// usage records say — though a settlement sent before the hang reached
// Redis only when it went on, and was sent again after. It starts when no
// minute turns before the hang ends.
func TestProcessRedisLeaseHung(t *testing.T) { leaseHung(t, 0) }

// TestProcessRedisLeaseHungAcrossMinute: the same, with a minute turning
// while Redis hangs. The rate limits' slices end with their minute, so
// requests after the turn ask Redis, and the first ones' scripts wait in
// its socket until it goes on, while their answers are lost to the
// timeout: what those admissions reserved is given back once Redis is
// back (it stayed reserved until it expired), and the budgets' slices
// count what the requests after the turn spend.
func TestProcessRedisLeaseHungAcrossMinute(t *testing.T) { leaseHung(t, 5900*time.Millisecond) }

// leaseHung runs the hang, started turn ahead of the turn of a minute (0:
// when no minute turns before its end, 15 s later).
func leaseHung(t *testing.T, turn time.Duration) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	// Slices of 5 s of use: what the instances hold covers the test's
	// requests while Redis hangs.
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m", "MG_LEASE_HORIZON=5s")
	secret, id := limitedKey(t, c, "leased-hung", "leases", `,"limits":{"requests_per_minute":100000},"budget":{"usd":"10","period":"day"}`)
	var answers tally
	var spent pricing.Money
	count := func(what string, shots []shot) {
		for _, s := range shots {
			if s.err != nil || s.status != 200 {
				t.Errorf("%s: a request on %s: %d %s %v", what, c.ins[s.in].name, s.status, s.body, s.err)
				continue
			}
			answers.add(pricedModel, s.body)
			spent += pricedCost(s.body)
		}
	}
	body := func(int) string { return chatBody(pricedModel, "settle me once", 20) }
	// The test, warm-up to resume, takes about 11 s. The hang starts
	// about 3.2 s in and ends 5 s later.
	next := time.Now().Truncate(time.Minute).Add(time.Minute)
	switch {
	case turn == 0 && time.Until(next) < 15*time.Second:
		time.Sleep(time.Until(next) + 100*time.Millisecond)
	case turn > 0:
		if time.Until(next) < turn {
			next = next.Add(time.Minute)
		}
		time.Sleep(time.Until(next.Add(-turn)))
	}
	stop := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(stop) })
	count("warming up", flood(c.ins, secret, 4, func() string { return body(0) }, stop, nil))

	// A burst admitted from slices; Redis hangs before its answers come
	// (the fake takes 400 ms), so their settlements wait for it.
	paused := make(chan struct{})
	go func() {
		time.Sleep(150 * time.Millisecond)
		if err := c.redis.Pause(); err != nil {
			t.Error(err)
		}
		close(paused)
	}()
	count("the burst", burst(c.ins, []string{secret}, 30, body))
	<-paused
	hung := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = c.redis.Resume()
		}
	}()
	time.Sleep(2500 * time.Millisecond) // the first settlements time out
	count("while Redis hangs", burst(c.ins, []string{secret}, 9, body))
	time.Sleep(time.Until(hung.Add(5 * time.Second)))
	if err := c.redis.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("Redis hung %v; %d requests answered in all, costing $%s", time.Since(hung).Round(time.Millisecond), answers.requests, spent)
	// Every instance shows what the answers cost, once. (A read that
	// fails, such as one longer than the admin client's timeout, is
	// logged and made again: this test counts, it does not time.)
	deadline := time.Now().Add(40 * time.Second)
	for _, in := range c.ins {
		for {
			asked := time.Now()
			got, reserved, err := readBudget(in, id)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				t.Logf("after %v: %v; asked again", time.Since(asked).Round(time.Millisecond), err)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if got == spent && reserved == 0 {
				break
			}
			if time.Now().After(deadline) || got > spent {
				t.Fatalf("on %s the budget shows $%s spent, $%s reserved; the answers cost $%s", in.name, got, reserved, spent)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitUsage(t, c.ins, map[string]*tally{id: &answers}, 30*time.Second)
}
