package caddygateway

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
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
	g.rebuild(tb)
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

// BenchmarkSubjects is what the limits and budgets of the managed key and
// its owner take to find (the gateway's Policies): the first step of an
// admission, which gateway's BenchmarkAdmitQuota measures whole.
func BenchmarkSubjects(b *testing.B) {
	g := newBenchGateway(b)
	withLimits(b, g, fullLimits())
	k, ok := g.app.managed.Lookup(keys.Digest(g.managedKey))
	if !ok {
		b.Fatal("no managed key")
	}
	key := gateway.FromManaged(k)
	b.ReportAllocs()
	for b.Loop() {
		if s := g.app.subjects(key); s.Key.Budget.Amount == 0 {
			b.Fatal("nothing enforced")
		}
	}
}
