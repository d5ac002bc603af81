package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
)

// The process tests of limits, budgets and usage across instances on Redis
// (docs/limits-and-usage.md): two caddy binaries on one redis-server, with
// requests fired at both at once.

// pricedModel is the fake's model instance.Caddyfile prices: $2.50 and $10
// per million input and output tokens.
const pricedModel = "oa/slow-400ms"

// estimatedAt finds a budget refusal's estimate of the request in its
// message.
var estimatedAt = regexp.MustCompile(`estimated at \$([0-9.]+)[.,]`)

// costlyPrefix starts a prompt the fake providers of the process tests
// count at two tokens a byte: more than the gateway's estimate of any
// text, for a budget passed by answers costlier than their estimates.
// They count every other prompt in words.
const costlyPrefix = "costly:"

// processPromptTokens is how the process tests' fake providers count a
// text of a prompt (costlyPrefix).
func processPromptTokens(text string) int {
	if strings.HasPrefix(text, costlyPrefix) {
		return 2 * len(text)
	}
	return len(strings.Fields(text))
}

// pricedCost is what an answer of pricedModel costs, exactly.
func pricedCost(body string) pricing.Money {
	return pricing.Money(2500*gjson.Get(body, "usage.prompt_tokens").Int() + 10_000*gjson.Get(body, "usage.completion_tokens").Int())
}

// tally is what the answers of a key's admitted requests said: what the
// usage records must hold for the key.
type tally struct {
	requests, input, output, unpriced int64
	cost                              pricing.Money
}

// add counts an answer of model.
func (t *tally) add(model, body string) {
	t.requests++
	t.input += gjson.Get(body, "usage.prompt_tokens").Int()
	t.output += gjson.Get(body, "usage.completion_tokens").Int()
	if model == pricedModel {
		t.cost += pricedCost(body)
	} else {
		t.unpriced++
	}
}

func (t tally) String() string {
	return fmt.Sprintf("%d requests, %d input and %d output tokens, $%s, %d unpriced", t.requests, t.input, t.output, t.cost, t.unpriced)
}

// shot is one request of a burst and its answer.
type shot struct {
	in, key int // the indexes of the instance and the key it went with
	status  int
	body    string
	header  http.Header
	err     error
}

// burst sends n chat requests at once, the i-th to ins[i%len(ins)] with
// the key secrets[i/len(ins)%len(secrets)] and the body body(i), so that
// every key goes to every instance, and returns the answers.
func burst(ins []*instance, secrets []string, n int, body func(i int) string) []shot {
	out := make([]shot, n)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := &out[i]
			s.in, s.key = i%len(ins), i/len(ins)%len(secrets)
			req, _ := http.NewRequest(http.MethodPost, ins[s.in].httpURL+"/v1/chat/completions", strings.NewReader(body(i)))
			req.Header.Set("Authorization", "Bearer "+secrets[s.key])
			req.Header.Set("Content-Type", "application/json")
			<-start
			res, err := client.Do(req)
			if err != nil {
				s.err = err
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			s.status, s.body, s.header, s.err = res.StatusCode, string(b), res.Header, err
		})
	}
	close(start)
	wg.Wait()
	return out
}

// limitedKey creates a managed key of owner with policy (JSON members
// such as `,"limits":{…}`, or "") on the first instance, and waits until
// every instance accepts it.
func limitedKey(t *testing.T, c *redisCluster, name, owner, policy string) (secret, id string) {
	t.Helper()
	status, body, err := adminRequest(http.MethodPost, c.ins[0].adminURL+"/modelgate/keys", `{"name":"`+name+`","owner":"`+owner+`"`+policy+`}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("creating key %s: %d %s %v", name, status, body, err)
	}
	secret, id = gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
	if _, err := propagation(c.ins, secret, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return secret, id
}

// sent is how many requests the fakes of c received in all.
func (c *redisCluster) sent() int {
	n := 0
	for _, f := range c.fakes {
		n += len(f.Requests())
	}
	return n
}

// oneMinute waits, when less than need is left of the current UTC minute,
// until the next one has begun: the requests-per-minute windows are
// aligned to it, and a burst that began in one and ended in the next
// would be counted in two (sliding) windows.
func oneMinute(need time.Duration) {
	if left := time.Minute - time.Duration(time.Now().UnixMilli()%60_000)*time.Millisecond; left < need {
		time.Sleep(left + 100*time.Millisecond)
	}
}

// stop ends the instance with SIGTERM, as a service manager does, and
// waits until it has exited: Caddy stops its apps first, and the usage
// recorder writes what it counted since its last flush.
func (in *instance) stop() {
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		in.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = in.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		in.t.Fatalf("instance %s did not exit within 30s of SIGTERM", in.name)
	}
}

// usageOf reads, on in's admin API, the usage of the key id since
// yesterday (UTC).
func usageOf(in *instance, id string) (tally, error) {
	now := time.Now().UTC()
	q := url.Values{"key_id": {id}, "from": {now.AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {now.Format(time.DateOnly)}}
	status, body, err := adminRequest(http.MethodGet, in.adminURL+"/modelgate/usage?"+q.Encode(), "")
	if err != nil {
		return tally{}, err
	}
	if status != 200 {
		return tally{}, fmt.Errorf("GET /modelgate/usage on %s: %d %s", in.name, status, body)
	}
	total := gjson.Get(body, "total")
	cost, err := pricing.ParseMoney(total.Get("cost_usd").Str)
	if err != nil {
		return tally{}, fmt.Errorf("GET /modelgate/usage on %s: cost_usd: %w in %s", in.name, err, body)
	}
	return tally{requests: total.Get("requests").Int(), input: total.Get("input_tokens").Int(),
		output: total.Get("output_tokens").Int(), unpriced: total.Get("unpriced_requests").Int(), cost: cost}, nil
}

// waitUsage waits until the usage of every key in want, read on every
// instance of ins, is what want says (the other instances' counts reach
// the records at their flushes, every 10 s), and returns how long that
// took.
func waitUsage(t *testing.T, ins []*instance, want map[string]*tally, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var diff []string
		for _, in := range ins {
			for id, w := range want {
				got, err := usageOf(in, id)
				if err != nil {
					t.Fatal(err)
				}
				if got != *w {
					diff = append(diff, fmt.Sprintf("on %s, key %s: %v, want %v", in.name, id, got, *w))
				}
			}
		}
		if len(diff) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("the usage after %v:\n%s", limit, strings.Join(diff, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// limitCase is a limit shared by keys: a key's own (one key), or an
// owner's (two keys of it).
type limitCase struct {
	name   string
	key    string // the keys' name, followed by -0, -1 …
	owner  string
	policy string // the keys' own, as limitedKey takes it
	keys   int
	who    string // whose limit a refusal names
	scope  string // "key" or "owner": where the key's status shows it
}

// create creates the keys of lc and their tallies in want.
func (lc limitCase) create(t *testing.T, c *redisCluster, want map[string]*tally) (secrets, ids []string) {
	t.Helper()
	for i := range lc.keys {
		secret, id := limitedKey(t, c, fmt.Sprintf("%s-%d", lc.key, i), lc.owner, lc.policy)
		secrets, ids = append(secrets, secret), append(ids, id)
		want[id] = new(tally)
	}
	return secrets, ids
}

// TestProcessRedisLimits: two instances on one redis-server share the
// limits and budgets of keys and of owners, and the usage, as docs/limits-and-usage.md
// "Tolerances across instances" states. Requests are fired at both at
// once (with two keys of one owner for an owner's limit):
//
//   - requests per minute, of a key and of an owner (instance.Caddyfile's
//     team-rpm): with 20, 60 requests in one burst; exactly 20 are
//     admitted (each told a different number remaining, 19 down to 0:
//     every check-and-count was atomic across both instances) and reach
//     the providers; the 40 others are 429 rate_limit_exceeded naming the
//     key or the owner, with retry-after and the x-ratelimit-* headers.
//   - tokens per minute: a key with 400 sends 12 requests at once, each
//     estimated at about 100 tokens; exactly as many as fit are
//     admitted, told what is left in equal steps.
//   - concurrent requests: a key with 3 sends 12 slow requests at once;
//     exactly 3 are admitted; once they are done, 3 more are.
//   - budgets, of a key and of an owner (team-budget): a burst of 40 at a
//     nearly spent $0.001: the spend stays within it (every estimate here
//     is at least its request's cost, so the documentation allows no overshoot
//     at all), and once they are settled both instances show that spend
//     and nothing reserved.
//   - a budget's overshoot: 20 requests at once whose answers cost more
//     than their estimates (a prompt the fake counts at two tokens a
//     byte, more than any estimate) take a $0.005 budget past its amount
//     by no more than the documented bound, the sum of (actual cost −
//     estimate) of the requests in flight; the next request is refused on
//     either instance.
//   - usage: GET /modelgate/usage on either instance counts every admitted
//     request of those keys exactly once — requests, tokens and cost as
//     the answers said, refused requests not at all — and still does
//     after further flushes and after one instance is stopped (SIGTERM)
//     and started again on its data directory, which then counts on.
func TestProcessRedisLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	c := startRedisCluster(t, 2, "MG_KEY_REFRESH=10m")
	a, b := c.ins[0], c.ins[1]
	want := map[string]*tally{}   // by key id: what its usage must be
	var concSecret, concID string // the concurrent key, used again at the end

	for _, lc := range []limitCase{
		{name: "a key's requests per minute", key: "rpm", owner: "team", policy: `,"limits":{"requests_per_minute":20}`, keys: 1, who: `key "rpm-0"`},
		{name: "an owner's requests per minute", key: "team-rpm", owner: "team-rpm", keys: 2, who: `owner "team-rpm"`},
	} {
		t.Run(lc.name, func(t *testing.T) {
			const limit, n = 20, 60
			secrets, ids := lc.create(t, c, want)
			oneMinute(15 * time.Second)
			before := c.sent()
			shots := burst(c.ins, secrets, n, func(i int) string { return chatBody(pricedModel, fmt.Sprintf("request %d", i), 10) })
			var admitted, refused [2]int
			remaining := map[string]int{}
			for i, s := range shots {
				h := s.header
				switch {
				case s.err != nil:
					t.Errorf("request %d: %v", i, s.err)
				case s.status == 200:
					admitted[s.in]++
					want[ids[s.key]].add(pricedModel, s.body)
					remaining[h.Get("X-Ratelimit-Remaining-Requests")]++
					if h.Get("X-Ratelimit-Limit-Requests") != strconv.Itoa(limit) {
						t.Errorf("an admitted request's x-ratelimit-limit-requests: %q", h.Get("X-Ratelimit-Limit-Requests"))
					}
				case s.status == 429:
					refused[s.in]++
					ra, _ := strconv.Atoi(h.Get("Retry-After"))
					reset, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-Requests"))
					if gjson.Get(s.body, "error.code").Str != "rate_limit_exceeded" || gjson.Get(s.body, "error.type").Str != "rate_limit_error" ||
						!strings.Contains(gjson.Get(s.body, "error.message").Str, lc.who) ||
						ra < 1 || ra > 60 || h.Get("X-Ratelimit-Limit-Requests") != strconv.Itoa(limit) ||
						h.Get("X-Ratelimit-Remaining-Requests") != "0" || err != nil || reset <= 0 || reset > 2*time.Minute {
						t.Errorf("a refusal on %s: %s %v", c.ins[s.in].name, s.body, h)
					}
				default:
					t.Errorf("request %d on %s: %d %s", i, c.ins[s.in].name, s.status, s.body)
				}
			}
			got := admitted[0] + admitted[1]
			t.Logf("rpm %d, %d requests at once with %d key(s): admitted %d (a %d, b %d), refused %d (a %d, b %d)",
				limit, n, lc.keys, got, admitted[0], admitted[1], refused[0]+refused[1], refused[0], refused[1])
			if got != limit || refused[0]+refused[1] != n-limit {
				t.Errorf("admitted %d of %d requests with a limit of %d per minute, refused %d", got, n, limit, refused[0]+refused[1])
			}
			for r := range limit {
				if k := remaining[strconv.Itoa(r)]; k != 1 {
					t.Errorf("%d admitted requests were told %d remaining, want one: %v", k, r, remaining)
					break
				}
			}
			if sent := c.sent() - before; sent != got {
				t.Errorf("the providers received %d requests for %d admitted", sent, got)
			}
		})
	}

	t.Run("a key's tokens per minute", func(t *testing.T) {
		// Each request is counted at its estimate when admitted (its text
		// and max_tokens 100); the answers, which correct it, come 2 s
		// later, after the burst is decided.
		const limit, n = 400, 12
		const slow = "oa/slow-2000ms"
		secret, id := limitedKey(t, c, "tpm", "team", `,"limits":{"tokens_per_minute":400}`)
		want[id] = new(tally)
		oneMinute(15 * time.Second)
		shots := burst(c.ins, []string{secret}, n, func(int) string { return chatBody(slow, "count my tokens", 100) })
		var admitted [2]int
		var remaining []int
		for i, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("request %d: %v", i, s.err)
			case s.status == 200:
				admitted[s.in]++
				want[id].add(slow, s.body)
				r, err := strconv.Atoi(s.header.Get("X-Ratelimit-Remaining-Tokens"))
				if err != nil || s.header.Get("X-Ratelimit-Limit-Tokens") != strconv.Itoa(limit) {
					t.Errorf("an admitted request's headers: %v", s.header)
				}
				remaining = append(remaining, r)
			case s.status == 429:
				if gjson.Get(s.body, "error.code").Str != "rate_limit_exceeded" || s.header.Get("Retry-After") == "" ||
					!strings.Contains(gjson.Get(s.body, "error.message").Str, `tokens per minute on key "tpm"`) {
					t.Errorf("a refusal on %s: %s %v", c.ins[s.in].name, s.body, s.header)
				}
			default:
				t.Errorf("request %d on %s: %d %s", i, c.ins[s.in].name, s.status, s.body)
			}
		}
		if len(remaining) == 0 {
			t.Fatal("no request admitted")
		}
		// The first admitted was told limit − estimate, the k-th
		// limit − k × estimate, and as many were admitted as fit.
		slices.Sort(remaining)
		est := limit - remaining[len(remaining)-1]
		t.Logf("tpm %d, %d requests at once, each estimated at %d tokens: admitted %d (a %d, b %d), told remaining %v",
			limit, n, est, len(remaining), admitted[0], admitted[1], remaining)
		if est <= 0 || len(remaining) != limit/est {
			t.Errorf("admitted %d requests of %d tokens each with a limit of %d per minute", len(remaining), est, limit)
		}
		for k, r := range remaining {
			if r != limit-(len(remaining)-k)*est {
				t.Errorf("remaining tokens %v, want steps of %d", remaining, est)
				break
			}
		}
	})

	t.Run("a key's concurrent requests", func(t *testing.T) {
		const limit, n = 3, 12
		secret, id := limitedKey(t, c, "conc", "team", `,"limits":{"concurrent_requests":3}`)
		want[id] = new(tally)
		concSecret, concID = secret, id
		const slow = "oa/slow-2000ms" // unpriced: counted as such
		start := time.Now()
		shots := burst(c.ins, []string{secret}, n, func(i int) string { return chatBody(slow, "hold a slot", 10) })
		took := time.Since(start)
		var admitted [2]int
		for i, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("request %d: %v", i, s.err)
			case s.status == 200:
				admitted[s.in]++
				want[id].add(slow, s.body)
			case s.status == 429:
				if s.header.Get("Retry-After") != "1" || gjson.Get(s.body, "error.type").Str != "rate_limit_error" ||
					!strings.Contains(gjson.Get(s.body, "error.message").Str, `concurrent requests on key "conc"`) {
					t.Errorf("a refusal on %s: %s %v", c.ins[s.in].name, s.body, s.header)
				}
			default:
				t.Errorf("request %d on %s: %d %s", i, c.ins[s.in].name, s.status, s.body)
			}
		}
		got := admitted[0] + admitted[1]
		t.Logf("%d concurrent requests allowed, %d sent at once: admitted %d (a %d, b %d); the burst took %v",
			limit, n, got, admitted[0], admitted[1], took.Round(time.Millisecond))
		if got != limit {
			t.Errorf("admitted %d of %d requests at once with %d concurrent allowed", got, n, limit)
		}
		// The slots were freed on both instances.
		for i, s := range burst(c.ins, []string{secret}, limit, func(int) string { return chatBody(pricedModel, "my turn", 10) }) {
			if s.err != nil || s.status != 200 {
				t.Errorf("request %d after the others ended: %d %s %v", i, s.status, s.body, s.err)
				continue
			}
			want[id].add(pricedModel, s.body)
		}
	})

	for _, lc := range []limitCase{
		{name: "a key's budget", key: "budget", owner: "team", policy: `,"budget":{"usd":"0.001","period":"day"}`, keys: 1, scope: "key"},
		{name: "an owner's budget", key: "team-budget", owner: "team-budget", keys: 2, scope: "owner"},
	} {
		t.Run(lc.name+", a burst when nearly spent", func(t *testing.T) {
			const budget = pricing.Cent / 10 // $0.001 a day
			secrets, ids := lc.create(t, c, want)
			var spent pricing.Money
			for i := range 4 {
				in, k := c.ins[i%2], i/2%len(secrets)
				status, body, _ := request(t, http.MethodPost, in.httpURL+"/v1/chat/completions", chatBody(pricedModel, "warm up", 20),
					"Authorization", "Bearer "+secrets[k])
				if status != 200 {
					t.Fatalf("warming up on %s: %d %s", in.name, status, body)
				}
				want[ids[k]].add(pricedModel, body)
				spent += pricedCost(body)
			}
			warm := spent
			const n = 40
			shots := burst(c.ins, secrets, n, func(i int) string { return chatBody(pricedModel, "a burst of requests", 20) })
			var admitted, refused [2]int
			for i, s := range shots {
				switch {
				case s.err != nil:
					t.Errorf("request %d: %v", i, s.err)
				case s.status == 200:
					admitted[s.in]++
					want[ids[s.key]].add(pricedModel, s.body)
					spent += pricedCost(s.body)
				case s.status == 429 && gjson.Get(s.body, "error.code").Str == "insufficient_quota" && s.header.Get("X-Should-Retry") == "false":
					refused[s.in]++
				default:
					t.Errorf("request %d on %s: %d %s %v", i, c.ins[s.in].name, s.status, s.body, s.header)
				}
			}
			t.Logf("budget $%s a day, $%s spent before the burst; %d requests at once with %d key(s): admitted %d (a %d, b %d), refused %d; spent $%s, $%s left",
				budget, warm, n, lc.keys, admitted[0]+admitted[1], admitted[0], admitted[1], refused[0]+refused[1], spent, budget-spent)
			if admitted[0]+admitted[1] == 0 || refused[0]+refused[1] == 0 {
				t.Errorf("admitted %d, refused %d: the budget should admit some and refuse the rest", admitted[0]+admitted[1], refused[0]+refused[1])
			}
			// Every estimate (the prompt, and max_tokens at the model's
			// price) is at least the request's cost: no overshoot at all.
			if spent > budget {
				t.Errorf("spent $%s of a $%s budget", spent, budget)
			}
			// Both instances see the spend settled: nothing reserved.
			for _, in := range c.ins {
				status, body, err := adminRequest(http.MethodGet, in.adminURL+"/modelgate/keys/"+ids[0]+"/usage?days=1", "")
				st := gjson.Get(body, "status."+lc.scope+".budget")
				got, perr := pricing.ParseMoney(st.Get("spent_usd").Str)
				if err != nil || status != 200 || perr != nil || got != spent || st.Get("reserved_usd").Str != "0" {
					t.Errorf("the budget's status on %s: %d %s %v; want $%s spent, nothing reserved", in.name, status, body, err, spent)
				}
			}
		})
	}

	t.Run("a budget passed by answers costlier than their estimates, within the stated bound", func(t *testing.T) {
		// A prompt the fake counts at two tokens a byte, more than the
		// estimate (a token a byte at most, for any text). Each request in
		// flight can take the budget past its amount by (actual cost −
		// estimate), and by no more: docs/limits-and-usage.md, Budgets, overshoot bound.
		const budget = pricing.Cent / 2 // $0.005 a day
		secret, id := limitedKey(t, c, "costly", "team", `,"budget":{"usd":"0.005","period":"day"}`)
		want[id] = new(tally)
		prompt := costlyPrefix + strings.Repeat(" a", 100)
		const n = 20
		shots := burst(c.ins, []string{secret}, n, func(int) string { return chatBody(pricedModel, prompt, 20) })
		var spent pricing.Money
		var actual []pricing.Money
		estimated := pricing.Money(-1)
		for i, s := range shots {
			switch {
			case s.err != nil:
				t.Errorf("request %d: %v", i, s.err)
			case s.status == 200:
				want[id].add(pricedModel, s.body)
				actual = append(actual, pricedCost(s.body))
				spent += pricedCost(s.body)
			case s.status == 429 && gjson.Get(s.body, "error.code").Str == "insufficient_quota":
				m := estimatedAt.FindStringSubmatch(gjson.Get(s.body, "error.message").Str)
				if m == nil {
					t.Fatalf("a refusal without the request's estimate: %s", s.body)
				}
				e, err := pricing.ParseMoney(m[1])
				if err != nil || estimated >= 0 && e != estimated {
					t.Fatalf("a refusal's estimate %q (%v), another's $%s", m[1], err, estimated)
				}
				estimated = e
			default:
				t.Errorf("request %d on %s: %d %s %v", i, c.ins[s.in].name, s.status, s.body, s.header)
			}
		}
		if len(actual) == 0 || estimated < 0 {
			t.Fatalf("admitted %d of %d: the budget should admit some and refuse the rest", len(actual), n)
		}
		var bound pricing.Money
		for _, a := range actual {
			if a <= estimated {
				t.Fatalf("an answer cost $%s, not more than its estimate $%s: the test's premise does not hold", a, estimated)
			}
			bound += a - estimated
		}
		over := spent - budget
		t.Logf("budget $%s a day; %d requests at once, each estimated at $%s and costing $%s: admitted %d, spent $%s, over by $%s; the stated bound $%s",
			budget, n, estimated, actual[0], len(actual), spent, over, bound)
		if over > bound {
			t.Errorf("spent $%s of a $%s budget: over by $%s, more than the stated bound $%s", spent, budget, over, bound)
		}
		// Spent, the budget refuses the next request on either instance.
		for _, in := range c.ins {
			status, body, _ := request(t, http.MethodPost, in.httpURL+"/v1/chat/completions", chatBody(pricedModel, "one more", 5),
				"Authorization", "Bearer "+secret)
			if status != 429 || gjson.Get(body, "error.code").Str != "insufficient_quota" {
				t.Errorf("a request on %s after the budget was passed: %d %s", in.name, status, body)
			}
		}
	})

	t.Run("usage counted once across instances and restarts", func(t *testing.T) {
		for id, w := range want {
			t.Logf("key %s, the answers: %v", id, w)
		}
		took := waitUsage(t, c.ins, want, 25*time.Second)
		t.Logf("GET /modelgate/usage on both instances showed every admitted request once after %v", took.Round(time.Millisecond))
		// The next flushes write the same counts again: nothing is added.
		time.Sleep(11 * time.Second)
		waitUsage(t, c.ins, want, 0)

		b.stop()
		if strings.Contains(b.logs(), "writing the usage records") {
			t.Errorf("b's usage was not written when it stopped:\n%s", b.problems(10))
		}
		// a alone, with b's records as b left them.
		waitUsage(t, []*instance{a}, want, 0)
		b.start()
		waitUsage(t, c.ins, want, 0)

		// Both count on after the restart, b on its own record again.
		if concID == "" {
			t.Fatal("no key of the concurrent test to send more with")
		}
		for i, s := range burst(c.ins, []string{concSecret}, 3, func(int) string { return chatBody(pricedModel, "after the restart", 10) }) {
			if s.err != nil || s.status != 200 {
				t.Fatalf("request %d after the restart: %d %s %v", i, s.status, s.body, s.err)
			}
			want[concID].add(pricedModel, s.body)
		}
		took = waitUsage(t, c.ins, want, 25*time.Second)
		t.Logf("after b's restart, 3 more requests showed on both instances after %v", took.Round(time.Millisecond))
	})
}
