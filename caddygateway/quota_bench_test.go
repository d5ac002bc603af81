package caddygateway

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/procstat"
	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/usage"
)

// These benchmarks measure what limits, budgets and usage accounting add
// to a request, as bench/cmd/loadbench's variants run them: modelgate_limit
// (a managed key, one rate limit, usage recorded)
// and modelgate_full (a managed key whose owner is itself, requests and
// tokens per minute and a monthly budget on the key and on the owner,
// concurrency on the key, usage recorded).

// fullLimits is modelgate_full's limits block: high enough never to refuse.
func fullLimits() *LimitsConfig {
	return &LimitsConfig{
		Key: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000_000, ConcurrentRequests: 100_000},
			Budget: &keys.Budget{USD: "1000000", Period: "month"}},
		Owner: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000_000},
			Budget: &keys.Budget{USD: "1000000", Period: "month"}},
	}
}

// oneLimit is modelgate_limit's limits block: one rate
// limit, the key's requests per minute.
func oneLimit() *LimitsConfig {
	return &LimitsConfig{Key: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 100_000_000}}}
}

// withLimits turns usage accounting and limits on in g's app, on an
// in-process state, as Provision does without a shared one.
func withLimits(tb testing.TB, g *benchGateway, limits *LimitsConfig) {
	tb.Helper()
	a := g.app
	a.Limits = limits
	if err := a.Limits.validate(); err != nil {
		tb.Fatal(err)
	}
	if err := a.Limits.provision(); err != nil {
		tb.Fatal(err)
	}
	var err error
	if a.usage, err = usage.New(storagetest.NewMemory(), usage.Options{Instance: "bench", Prefix: usagePrefix}); err != nil {
		tb.Fatal(err)
	}
	if a.quota, err = quota.New(quota.Config{State: state.NewLocal(), Spender: a.usage}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPerRequestFull serves requests as bench/cmd/loadbench's modelgate
// variant does (a static key, no limits) and as its modelgate_full does
// (a managed key, every feature on), with a managed key alone in between:
// on the chat pass-through, then on the paths whose features cost the most
// in the harness (a 50-event stream, a Messages pass-through, the
// Anthropic translation). The difference between a "_managed_key" row and
// its "_limit" or "_full" twin is what the features cost per request. cpu-ns/op is the
// process's CPU time per request, as in BenchmarkPerRequest: steadier than
// ns/op on a shared machine. The "_50_in_flight" rows serve 50 requests at
// once, as bench/cmd/loadbench's clients keep them: every request's state is
// then cold in the caches when it settles, and the features cost about
// twice what they cost one request at a time.
func BenchmarkPerRequestFull(b *testing.B) {
	chat := benchChatBody("oa/gpt-4o-mini", 0, false)
	stream := benchChatBody("oa/gpt-4o-mini", 45, true)
	anthropicChat := benchChatBody("claude/claude-sonnet-4-5", 0, false)
	messages := []byte(`{"model":"claude/claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Summarise the plot of Hamlet in one sentence please"}]}`)
	cjk := benchCJKBody("oa/gpt-4o-mini", 100<<10)
	for _, bc := range []struct {
		name     string
		path     string
		body     []byte
		managed  bool
		limits   func() *LimitsConfig // nil: none, no usage accounting
		parallel bool
	}{
		{"openai_static_key", "/v1/chat/completions", chat, false, nil, false},
		{"openai_managed_key", "/v1/chat/completions", chat, true, nil, false},
		{"openai_managed_key_limit", "/v1/chat/completions", chat, true, oneLimit, false},
		{"openai_managed_key_full", "/v1/chat/completions", chat, true, fullLimits, false},
		// A 100 KiB prompt of Chinese prose, whose every byte the
		// estimate reads.
		{"openai_cjk_100k_managed_key", "/v1/chat/completions", cjk, true, nil, false},
		{"openai_cjk_100k_managed_key_full", "/v1/chat/completions", cjk, true, fullLimits, false},
		{"openai_managed_key_50_in_flight", "/v1/chat/completions", chat, true, nil, true},
		{"openai_managed_key_full_50_in_flight", "/v1/chat/completions", chat, true, fullLimits, true},
		// The paths whose features cost the most in bench/cmd/loadbench's runs:
		// a 50-event stream, the Messages pass-through, the Anthropic
		// translation.
		{"openai_stream_managed_key", "/v1/chat/completions", stream, true, nil, false},
		{"openai_stream_managed_key_limit", "/v1/chat/completions", stream, true, oneLimit, false},
		{"openai_stream_managed_key_full", "/v1/chat/completions", stream, true, fullLimits, false},
		{"messages_managed_key", "/v1/messages", messages, true, nil, false},
		{"messages_managed_key_limit", "/v1/messages", messages, true, oneLimit, false},
		{"messages_managed_key_full", "/v1/messages", messages, true, fullLimits, false},
		{"messages_managed_key_50_in_flight", "/v1/messages", messages, true, nil, true},
		{"messages_managed_key_full_50_in_flight", "/v1/messages", messages, true, fullLimits, true},
		{"anthropic_managed_key_50_in_flight", "/v1/chat/completions", anthropicChat, true, nil, true},
		{"anthropic_managed_key_full_50_in_flight", "/v1/chat/completions", anthropicChat, true, fullLimits, true},
	} {
		limited := bc.limits != nil
		b.Run(bc.name, func(b *testing.B) {
			g := newBenchGateway(b)
			if limited {
				withLimits(b, g, bc.limits())
			}
			key := benchStaticKey
			if bc.managed {
				key = g.managedKey
			}
			// The Messages API's clients send the key in X-Api-Key.
			messagesAPI := bc.path == "/v1/messages"
			header := []string{"Authorization", "Bearer " + key}
			if messagesAPI {
				header = []string{"X-Api-Key", key}
			}
			w := &sink{header: make(http.Header), keep: true}
			if err := g.serveModelgate(w, g.request(w, bc.path, bc.body, header...)); err != nil || w.status != 200 {
				b.Fatalf("status %d, error %v: %.400s", w.status, err, w.body.Bytes())
			}
			// The rate-limit headers of the client's API: Anthropic's for
			// the Messages API, OpenAI's for chat (translated or not).
			limitHeader := "X-Ratelimit-Remaining-Requests"
			if messagesAPI {
				limitHeader = "Anthropic-Ratelimit-Requests-Remaining"
			}
			if got := w.header.Get(limitHeader) != ""; got != limited {
				b.Fatalf("%s set %v with limits %v: %v", limitHeader, got, limited, w.header)
			}
			if bytes.Equal(bc.body, stream) && !bytes.HasSuffix(w.body.Bytes(), []byte("data: [DONE]\n\n")) {
				b.Fatalf("the stream did not end: %s", w.body.Bytes())
			}
			serve := func() bool {
				w := &sink{header: make(http.Header)}
				if err := g.serveModelgate(w, g.request(w, bc.path, bc.body, header...)); err != nil || w.status != 200 {
					b.Errorf("status %d, error %v", w.status, err)
					return false
				}
				return true
			}
			b.ReportAllocs()
			cpuBefore, cpuOK := processCPU()
			if bc.parallel {
				b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && serve() {
					}
				})
			} else {
				for b.Loop() && serve() {
				}
			}
			if cpuAfter, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkAdmitQuota is the accounting of one chat request of the
// managed key and its pieces: the admission (subjects, estimate, the
// quota engine, the rate-limit headers) with its settling and the usage
// record ("request"), and each piece on its own.
func BenchmarkAdmitQuota(b *testing.B) {
	g := newBenchGateway(b)
	withLimits(b, g, fullLimits())
	a := g.app
	k, ok := a.managed.Lookup(keys.Digest(g.managedKey))
	if !ok {
		b.Fatal("no managed key")
	}
	key := &Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Models: k.Models, Limits: k.Limits, Budget: k.Budget}
	body := benchChatBody("oa/gpt-4o-mini", 0, false)
	c := &call{endpoint: endpointChat, model: "oa/gpt-4o-mini", body: body}
	targets := a.dispatch.resolve(c.model)
	w := &sink{header: make(http.Header)}
	r := g.request(w, "/v1/chat/completions", body)
	m := &meter{start: time.Now(), provider: a.providers["oa"], model: "gpt-4o-mini",
		usage: usageInfo{Prompt: 14, Completion: 10, Known: true}}
	cost, priced := a.prices.Cost("openai", "gpt-4o-mini", m.usage.pricing())
	if !priced {
		b.Fatal("gpt-4o-mini has no price")
	}

	// The harness's chat request, and one with 100 KiB of Chinese prose.
	cjk := &call{endpoint: endpointChat, model: "oa/gpt-4o-mini", body: benchCJKBody("oa/gpt-4o-mini", 100<<10)}
	for _, bc := range []struct {
		name string
		c    *call
	}{{"", c}, {"_cjk_100k", cjk}} {
		b.Run("request"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				clear(w.header)
				ad, ok := a.admitQuota(w, r, key, bc.c, targets)
				if !ok || ad.adm == nil {
					b.Fatalf("refused: %d", w.status)
				}
				a.recordUsage(key, m, ad, cost, priced)
				ad.done(r.Context(), m, cost, priced)
			}
		})
	}
	b.Run("subjects", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s := a.subjects(key); !enforced(&s) {
				b.Fatal("nothing enforced")
			}
		}
	})
	for _, bc := range []struct {
		name string
		c    *call
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
	s := a.subjects(key)
	est := a.estimateCall(c, targets)
	ask := quota.Ask{EstimatedTokens: est.tokens, EstimatedCost: est.cost, Rate: true}
	ctx := context.Background()
	b.Run("admit_done", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			adm, ref, err := a.quota.Admit(ctx, s, ask)
			if err != nil || ref != nil {
				b.Fatal(ref, err)
			}
			if err := adm.Done(ctx, quota.Actual{Tokens: 24, Cost: cost, Priced: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	adm, _, err := a.quota.Admit(ctx, s, ask)
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
			a.recordUsage(key, m, ad, cost, priced)
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
			local := a.quota
			a.quota = q
			defer func() { a.quota = local }()
			request := func(w *sink, r *http.Request) bool {
				clear(w.header)
				ad, ok := a.admitQuota(w, r, key, c, targets)
				if !ok || ad.adm == nil {
					b.Errorf("refused: %d", w.status)
					return false
				}
				a.recordUsage(key, m, ad, cost, priced)
				ad.done(r.Context(), m, cost, priced)
				return true
			}
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					w := &sink{header: make(http.Header)}
					r := g.request(w, "/v1/chat/completions", body)
					for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && request(w, r); {
					}
				})
			}
			wg.Wait()
			cpu0, _ := processCPU()
			rcpu0, _ := procstat.CPU(srv.PID())
			b.SetParallelism(25) // × GOMAXPROCS 2 on the CI machine
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &sink{header: make(http.Header)}
				r := g.request(w, "/v1/chat/completions", body)
				for pb.Next() && request(w, r) {
				}
			})
			b.StopTimer()
			cpu1, _ := processCPU()
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
