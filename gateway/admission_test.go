package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// chatWith is a chat request of model with fields added at its top level
// and one user message.
func chatWith(model, fields, content string) []byte { return chatBody(model, fields, content) }

// benchEmbeddingsBody is an embeddings request of 64 inputs of ~30 words,
// 1,536 dimensions, in format ("float" or "base64").
func benchEmbeddingsBody(model, format string) []byte {
	b := []byte(`{"model":"` + model + `","dimensions":1536,"encoding_format":"` + format + `","input":[`)
	for i := range 64 {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"input %d: %s"`, i, strings.Repeat("word ", 30))
	}
	return append(b, "]}"...)
}

// TestAdmissionRefusesUpFront: a request whose estimate alone passes a
// budget, or a tokens-per-minute limit, is refused before it is sent —
// whatever its text (CJK prose and minified JSON without a space), however
// many answers it asks for (n), on every ingress (Messages, embeddings and
// rerank were estimated at nothing) — and a budget refusal says what the
// request would do. The same requests made smaller are admitted.
func TestAdmissionRefusesUpFront(t *testing.T) {
	budget := func(usd string) func(testing.TB) Policies {
		return func(tb testing.TB) Policies { return budgetOf(tb, usd) }
	}
	tpm := func(n int64) func(testing.TB) Policies { return func(testing.TB) Policies { return tpmOf(n) } }
	cjk := strings.Repeat("人工智能正在改变我们的生活方式。", 700)                                                  // 33 KiB, no space
	minified := strings.Repeat(`{"id":12345,"name":"Widget","tags":["a","b"],"price":9.99},`, 1000) // 58 KiB
	rerankBody := func(docs int) []byte {
		b := []byte(`{"model":"co/rerank-v3.5","query":"which one?","documents":[`)
		for i := range docs {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"document %d"`, i)
		}
		return append(b, "]}"...)
	}
	messages := func(maxTokens int) []byte {
		return fmt.Appendf(nil, `{"model":"claude/claude-sonnet-4-5","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, maxTokens)
	}
	for _, tc := range []struct {
		name   string
		limits func(testing.TB) Policies
		api    API
		body   []byte // refused
		fits   []byte // admitted
		code   string // error.code (OpenAI) or error.type (Anthropic)
		says   string
	}{
		{"n answers pass a budget", budget("0.01"), APIChat,
			chatWith("oa/gpt-4o-mini", `,"n":128,"max_tokens":16000`, "hi"), chatWith("oa/gpt-4o-mini", `,"n":2,"max_tokens":1000`, "hi"),
			"insufficient_quota", "is more than the whole budget of key \"bench\" ($0.01 per day)"},
		{"n answers pass tokens per minute", tpm(20000), APIChat,
			chatWith("oa/gpt-4o-mini", `,"n":128,"max_tokens":16000`, "hi"), chatWith("oa/gpt-4o-mini", `,"n":2,"max_tokens":1000`, "hi"),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"CJK prose passes a budget", budget("0.003"), APIChat,
			chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, cjk), chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, cjk[:3000]),
			"insufficient_quota", "is more than the whole budget"},
		{"minified JSON passes tokens per minute", tpm(20000), APIChat,
			chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, minified), chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, minified[:3000]),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"a Messages request's max_tokens", budget("0.05"), APIMessages,
			messages(100000), messages(1000),
			"rate_limit_error", "is more than the whole budget"},
		{"embeddings' inputs", tpm(1000), APIEmbeddings,
			benchEmbeddingsBody("oa/text-embedding-3-small", "float"), []byte(`{"model":"oa/text-embedding-3-small","input":"hi"}`),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"a rerank's searches", budget("0.01"), APIRerank,
			rerankBody(1000), rerankBody(10),
			"insufficient_quota", "is more than the whole budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t)
			g.withLimits(t, tc.limits(t))
			code := "error.code"
			if tc.api == APIMessages {
				code = "error.type"
			}
			o, _ := g.serve(t, tc.api, tc.body, g.static)
			body := string(o.Body)
			if o.Status != 429 || gjson.Get(body, code).Str != tc.code ||
				!strings.Contains(gjson.Get(body, "error.message").Str, tc.says) || o.Header.Get("X-Should-Retry") != "false" || o.Retryable {
				t.Fatalf("refused? %d %s %v", o.Status, body, o.Header)
			}
			if strings.Contains(body, "exceeded the budget") {
				t.Errorf("nothing was spent, yet: %s", body)
			}
			if o, s := g.serve(t, tc.api, tc.fits, g.static); o.Status != 200 {
				t.Fatalf("a request that fits: %d %s", o.Status, answer(o, s))
			}
		})
	}
}

// TestBudgetRefusalWouldPass: with part of a budget spent, a request whose
// estimate passes what is left is told how much is left, not that the
// budget was exceeded.
func TestBudgetRefusalWouldPass(t *testing.T) {
	g := newTestGateway(t)
	g.withLimits(t, budgetOf(t, "0.001"))
	// 5,000 words, which the fake provider counts as 5,000 tokens, and an
	// answer of 10: $0.000756 of gpt-4o-mini spent, $0.000244 left.
	spend := chatWith("oa/gpt-4o-mini", `,"max_tokens":10`, strings.TrimSpace(strings.Repeat("a ", 5000)))
	if o, s := g.serve(t, APIChat, spend, g.static); o.Status != 200 {
		t.Fatalf("spending: %d %s", o.Status, answer(o, s))
	}
	// At most 1,000 tokens of output: $0.0006, and the input.
	o, _ := g.serve(t, APIChat, chatWith("oa/gpt-4o-mini", `,"max_tokens":1000`, "hi"), g.static)
	msg := gjson.GetBytes(o.Body, "error.message").Str
	if o.Status != 429 || !strings.HasPrefix(msg, "This request, estimated at $0.0006") ||
		!strings.Contains(msg, `would pass the budget of key "bench": $0.000244 left of $0.001 per day ($0.000756 spent or reserved)`) ||
		o.Header.Get("Retry-After") == "" || o.RetryAfter <= 0 || o.Retryable {
		t.Fatalf("%d %s %v %+v", o.Status, o.Body, o.Header, o)
	}
}

// TestUnknownModelUnderBudget: under a budget, a model nothing routes is
// 404 model_not_found, as without one, and never 403 model_not_priced —
// also when the default provider takes every bare name, and the price
// table knows none by that name. A provider's model named as such, which
// the price table does not know, is still 403 model_not_priced.
func TestUnknownModelUnderBudget(t *testing.T) {
	for _, def := range []string{"", "oa"} {
		g := newTestGateway(t)
		g.cfg.DefaultProvider = def
		g.withLimits(t, budgetOf(t, "1"))
		for _, tc := range []struct {
			model  string
			status int
			code   string
		}{
			{"no-such-model", 404, "model_not_found"},
			{"oa/no-such-model", 403, "model_not_priced"},
			{"gpt-4o-mini", 200, ""}, // the default provider's, priced
		} {
			if def == "" && tc.model == "gpt-4o-mini" {
				tc.status, tc.code = 404, "model_not_found"
			}
			o, s := g.serve(t, APIChat, chatWith(tc.model, "", "hi"), g.static)
			if o.Status != tc.status || gjson.Get(answer(o, s), "error.code").Str != tc.code {
				t.Errorf("default provider %q, model %q: %d %s", def, tc.model, o.Status, answer(o, s))
			}
		}
	}
}
