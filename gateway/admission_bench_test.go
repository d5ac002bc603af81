package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
)

// fullPolicies is cmd/loadbench's modelgate_full: requests and tokens per
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

// benchChatBody is the harness's chat request (cmd/loadbench).
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
