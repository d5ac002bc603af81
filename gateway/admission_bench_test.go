package gateway

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/procstat"
	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
)

// fullPolicies is bench/cmd/loadbench's modelgate_full: requests and tokens per
// minute and a monthly budget on the key and on its owner, concurrency on
// the key; high enough never to refuse.
type fullPolicies struct{}

func (fullPolicies) Subjects(k *Key) quota.Subjects {
	budget := quota.Budget{Amount: pricing.Money(1_000_000) * pricing.Dollar, Period: quota.Month}
	s := quota.Subjects{
		Key: quota.Subject{ID: k.CountedAs(), Name: k.Name, Budget: budget,
			Limits: quota.Limits{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000_000, Concurrent: 100_000}},
	}
	if k.Owner != "" {
		s.Owner = quota.Subject{ID: k.Owner, Name: k.Owner, Budget: budget,
			Limits: quota.Limits{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000_000}}
	}
	return s
}

func (fullPolicies) AllowsUnpriced() bool { return false }

// benchChatBody is the harness's chat request (bench/cmd/loadbench).
func benchChatBody(model string, words int, stream bool) []byte {
	text := "Summarise the plot of Hamlet in one sentence please"
	if words > 0 {
		text = strings.TrimSpace(strings.Repeat("word ", words))
	}
	s := `{"model":"` + model + `","max_tokens":256,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"` + text + `"}]`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

// benchCJKBody is a chat request whose user message is about size bytes
// of Chinese prose, without a space or a newline.
func benchCJKBody(model string, size int) []byte {
	const sentence = "我们今天讨论的是人工智能在教育领域的应用和未来发展趋势，以及它对学生和教师的影响。"
	text := strings.Repeat(sentence, max(1, size/len(sentence)))
	return []byte(`{"model":"` + model + `","max_tokens":256,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"` + text + `"}]}`)
}

// BenchmarkAdmitQuota is the accounting of one chat request of the
// managed key and its pieces: the admission (subjects, estimate, the
// quota engine, the rate-limit headers) with its settling and the usage
// record ("request"), and each piece on its own.
func BenchmarkAdmitQuota(b *testing.B) {
	tg := newTestGateway(b)
	tg.withLimits(b, fullPolicies{})
	a := tg.Gateway
	key := tg.managed
	body := benchChatBody("oa/gpt-4o-mini", 0, false)
	c := &request{endpoint: endpointChat, model: "oa/gpt-4o-mini", body: body}
	targets := a.routes.resolve(c.model)
	call := &Call{API: APIChat, Key: key}
	o := &Outcome{Header: make(http.Header), Start: time.Now(), Key: key, Target: targets[0],
		Usage: Usage{Prompt: 14, Completion: 10, Known: true}}
	cost, priced := a.prices.Cost("openai", "gpt-4o-mini", pricingUsage(o.Usage))
	if !priced {
		b.Fatal("gpt-4o-mini has no price")
	}
	o.Cost, o.Priced = cost, priced
	ctx := context.Background()

	// The harness's chat request, and one with 100 KiB of Chinese prose.
	cjk := &request{endpoint: endpointChat, model: "oa/gpt-4o-mini", body: benchCJKBody("oa/gpt-4o-mini", 100<<10)}
	for _, bc := range []struct {
		name string
		c    *request
	}{{"", c}, {"_cjk_100k", cjk}} {
		b.Run("request"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				clear(o.Header)
				ad, ok := a.admit(ctx, call, o, bc.c, targets)
				if !ok || ad.adm == nil {
					b.Fatalf("refused: %d", o.Status)
				}
				a.recordUsage(o, ad)
				ad.done(ctx, o)
			}
		})
	}
	for _, bc := range []struct {
		name string
		c    *request
	}{{"", c}, {"_cjk_100k", cjk}} {
		b.Run("estimate"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if e := a.estimateCall(bc.c, targets); !e.priced {
					b.Fatal("unpriced")
				}
			}
		})
	}
	s := a.limits.Policies.Subjects(key)
	est := a.estimateCall(c, targets)
	ask := quota.Ask{EstimatedTokens: est.tokens, EstimatedCost: est.cost, Rate: true}
	b.Run("admit_done", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			adm, ref, err := a.limits.Quota.Admit(ctx, s, ask)
			if err != nil || ref != nil {
				b.Fatal(ref, err)
			}
			if err := adm.Done(ctx, quota.Actual{Tokens: 24, Cost: cost, Priced: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	adm, _, err := a.limits.Quota.Admit(ctx, s, ask)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("headers", func(b *testing.B) {
		h := make(http.Header)
		b.ReportAllocs()
		for b.Loop() {
			clear(h)
			adm.Headers().SetOpenAI(h)
		}
	})
	b.Run("record_usage", func(b *testing.B) {
		ad := admission{adm: adm, est: est}
		b.ReportAllocs()
		for b.Loop() {
			a.recordUsage(o, ad)
		}
	})
	// The request's admission, usage and settling with the state on a
	// redis-server (appendfsync everysec), 50 requests in flight as
	// bench/cmd/loadbench's clients keep them: each counted one by one (two
	// scripts a request), and leased to the instance in slices, as an
	// instance of a cluster does. cpu-ns/op is this process's CPU per
	// request, redis-cpu-ns/op redis-server's; the first half second, in
	// which leases learn the rate of use, is not measured.
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	for _, leased := range []bool{false, true} {
		name := "request_on_redis_50_in_flight"
		if leased {
			name = "request_on_redis_leased_50_in_flight"
		}
		b.Run(name, func(b *testing.B) {
			st := redisState(b, srv.Addr)
			cfg := quota.Config{State: st, Spender: a.usage}
			if leased {
				cfg.Lease = &quota.Leasing{}
			}
			q, err := quota.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			q.Start()
			defer func() { _ = q.Stop(ctx) }()
			local := a.limits.Quota
			a.limits.Quota = q
			defer func() { a.limits.Quota = local }()
			request := func(o *Outcome) bool {
				clear(o.Header)
				ad, ok := a.admit(ctx, call, o, c, targets)
				if !ok || ad.adm == nil {
					b.Errorf("refused: %d", o.Status)
					return false
				}
				a.recordUsage(o, ad)
				ad.done(ctx, o)
				return true
			}
			outcome := func() *Outcome {
				o2 := *o
				o2.Header = make(http.Header)
				return &o2
			}
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					o := outcome()
					for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && request(o); {
					}
				})
			}
			wg.Wait()
			self := os.Getpid()
			cpu0, _ := procstat.CPU(self)
			rcpu0, _ := procstat.CPU(srv.PID())
			b.SetParallelism(25) // × GOMAXPROCS 2 on the CI machine
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				o := outcome()
				for pb.Next() && request(o) {
				}
			})
			b.StopTimer()
			cpu1, _ := procstat.CPU(self)
			rcpu1, _ := procstat.CPU(srv.PID())
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(rcpu1-rcpu0)/float64(b.N), "redis-cpu-ns/op")
		})
	}
}

// redisState is a shared state on the redis-server at addr, under a key
// prefix of its own.
func redisState(tb testing.TB, addr string) state.State {
	tb.Helper()
	rdb, err := redisclient.New(redisclient.Options{Addresses: []string{addr}})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: "bench" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
	return st
}

// BenchmarkEstimateBody is a request's token estimate (estimateCall's
// reading of the body) for the harness's chat body and for a longer
// conversation: 40 messages, tool calls and their results, and a tool
// schema, about 16 KiB.
func BenchmarkEstimateBody(b *testing.B) {
	var long strings.Builder
	long.WriteString(`{"model":"oa/gpt-4o-mini","max_completion_tokens":512,"tools":[{"type":"function","function":{"name":"lookup","description":"Looks a word up","parameters":{"type":"object","properties":{"word":{"type":"string","description":"the word"}},"required":["word"]}}}],"messages":[{"role":"system","content":"You are a terse assistant."}`)
	for i := range 40 {
		switch i % 3 {
		case 0:
			long.WriteString(`,{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("What does the word mean in this sentence, please? ", 6) + `"}]}`)
		case 1:
			long.WriteString(`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_` + strconv.Itoa(i) + `","type":"function","function":{"name":"lookup","arguments":"{\"word\":\"gateway\"}"}}]}`)
		default:
			long.WriteString(`,{"role":"tool","tool_call_id":"call_` + strconv.Itoa(i-1) + `","content":"` + strings.Repeat("A gateway is a way in. ", 12) + `"}`)
		}
	}
	long.WriteString(`]}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"chat", benchChatBody("oa/gpt-4o-mini", 0, false)},
		{"long_chat", []byte(long.String())},
		{"cjk_100k", benchCJKBody("oa/gpt-4o-mini", 100<<10)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if e := estimateBody(bc.body); e.in == 0 || e.maxOut == 0 {
				b.Fatalf("estimate %+v", e)
			}
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				estimateBody(bc.body)
			}
		})
	}
}
