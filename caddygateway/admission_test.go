package caddygateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/keys"
)

// budgetOf and tpmOf are limits blocks that give every key a daily budget
// of usd dollars, or a tokens-per-minute limit.
func budgetOf(usd string) func() *LimitsConfig {
	return func() *LimitsConfig {
		return &LimitsConfig{Key: &keys.Policy{Budget: &keys.Budget{USD: usd, Period: "day"}}}
	}
}

func tpmOf(n int64) func() *LimitsConfig {
	return func() *LimitsConfig {
		return &LimitsConfig{Key: &keys.Policy{Limits: &keys.Limits{TokensPerMinute: n}}}
	}
}

// chatWith is a chat request of model with fields added at its top level
// and one user message.
func chatWith(model, fields, content string) []byte {
	return fmt.Appendf(nil, `{"model":%q%s,"messages":[{"role":"user","content":%q}]}`, model, fields, content)
}

// TestAdmissionRefusesUpFront: a request whose estimate alone passes a
// budget, or a tokens-per-minute limit, is refused before it is sent —
// whatever its text (CJK prose and minified JSON without a space), however
// many answers it asks for (n), on every ingress (Messages, embeddings and
// rerank were estimated at nothing) — and a budget refusal says what the
// request would do. The same requests made smaller are admitted.
func TestAdmissionRefusesUpFront(t *testing.T) {
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
		limits func() *LimitsConfig
		path   string
		body   []byte // refused
		fits   []byte // admitted
		code   string // error.code (OpenAI) or error.type (Anthropic)
		says   string
	}{
		{"n answers pass a budget", budgetOf("0.01"), "/v1/chat/completions",
			chatWith("oa/gpt-4o-mini", `,"n":128,"max_tokens":16000`, "hi"), chatWith("oa/gpt-4o-mini", `,"n":2,"max_tokens":1000`, "hi"),
			"insufficient_quota", "is more than the whole budget of key \"bench\" ($0.01 per day)"},
		{"n answers pass tokens per minute", tpmOf(20000), "/v1/chat/completions",
			chatWith("oa/gpt-4o-mini", `,"n":128,"max_tokens":16000`, "hi"), chatWith("oa/gpt-4o-mini", `,"n":2,"max_tokens":1000`, "hi"),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"CJK prose passes a budget", budgetOf("0.003"), "/v1/chat/completions",
			chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, cjk), chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, cjk[:3000]),
			"insufficient_quota", "is more than the whole budget"},
		{"minified JSON passes tokens per minute", tpmOf(20000), "/v1/chat/completions",
			chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, minified), chatWith("oa/gpt-4o-mini", `,"max_tokens":16`, minified[:3000]),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"a Messages request's max_tokens", budgetOf("0.05"), "/v1/messages",
			messages(100000), messages(1000),
			"rate_limit_error", "is more than the whole budget"},
		{"embeddings' inputs", tpmOf(1000), "/v1/embeddings",
			benchEmbeddingsBody("oa/text-embedding-3-small", "float"), []byte(`{"model":"oa/text-embedding-3-small","input":"hi"}`),
			"rate_limit_exceeded", "Request too large for tokens per minute"},
		{"a rerank's searches", budgetOf("0.01"), "/v1/rerank",
			rerankBody(1000), rerankBody(10),
			"insufficient_quota", "is more than the whole budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newBenchGateway(t)
			withLimits(t, g, tc.limits())
			header := []string{"Authorization", "Bearer " + benchStaticKey}
			code := "error.code"
			if tc.path == "/v1/messages" {
				header, code = []string{"X-Api-Key", benchStaticKey}, "error.type"
			}
			w := &sink{header: make(http.Header), keep: true}
			if err := g.serveModelgate(w, g.request(w, tc.path, tc.body, header...)); err != nil {
				t.Fatal(err)
			}
			body := w.body.String()
			if w.status != http.StatusTooManyRequests || gjson.Get(body, code).Str != tc.code ||
				!strings.Contains(gjson.Get(body, "error.message").Str, tc.says) || w.header.Get("X-Should-Retry") != "false" {
				t.Fatalf("refused? %d %s %v", w.status, body, w.header)
			}
			if strings.Contains(body, "exceeded the budget") {
				t.Errorf("nothing was spent, yet: %s", body)
			}
			w = &sink{header: make(http.Header), keep: true}
			if err := g.serveModelgate(w, g.request(w, tc.path, tc.fits, header...)); err != nil || w.status != http.StatusOK {
				t.Fatalf("a request that fits: %d %v %s", w.status, err, w.body.Bytes())
			}
		})
	}
}

// TestBudgetRefusalWouldPass: with part of a budget spent, a request whose
// estimate passes what is left is told how much is left, not that the
// budget was exceeded.
func TestBudgetRefusalWouldPass(t *testing.T) {
	g := newBenchGateway(t)
	withLimits(t, g, budgetOf("0.001")())
	header := []string{"Authorization", "Bearer " + benchStaticKey}
	// 5,000 words, which the fake provider counts as 5,000 tokens, and an
	// answer of 10: $0.000756 of gpt-4o-mini spent, $0.000244 left.
	w := &sink{header: make(http.Header), keep: true}
	spend := chatWith("oa/gpt-4o-mini", `,"max_tokens":10`, strings.TrimSpace(strings.Repeat("a ", 5000)))
	if err := g.serveModelgate(w, g.request(w, "/v1/chat/completions", spend, header...)); err != nil || w.status != 200 {
		t.Fatalf("spending: %d %v %s", w.status, err, w.body.Bytes())
	}
	// At most 1,000 tokens of output: $0.0006, and the input.
	w = &sink{header: make(http.Header), keep: true}
	if err := g.serveModelgate(w, g.request(w, "/v1/chat/completions", chatWith("oa/gpt-4o-mini", `,"max_tokens":1000`, "hi"), header...)); err != nil {
		t.Fatal(err)
	}
	msg := gjson.Get(w.body.String(), "error.message").Str
	if w.status != 429 || !strings.HasPrefix(msg, "This request, estimated at $0.0006") ||
		!strings.Contains(msg, `would pass the budget of key "bench": $0.000244 left of $0.001 per day ($0.000756 spent or reserved)`) ||
		w.header.Get("Retry-After") == "" {
		t.Fatalf("%d %s %v", w.status, w.body.Bytes(), w.header)
	}
}

// TestUnknownModelUnderBudget: under a budget, a model nothing routes is
// 404 model_not_found, as without one, and never 403 model_not_priced —
// also when the default provider takes every bare name, and the price
// table knows none by that name. A provider's model named as such, which
// the price table does not know, is still 403 model_not_priced.
func TestUnknownModelUnderBudget(t *testing.T) {
	for _, def := range []string{"", "oa"} {
		g := newBenchGateway(t)
		withLimits(t, g, budgetOf("1")())
		g.app.dispatch.defaultProvider = def
		header := []string{"Authorization", "Bearer " + benchStaticKey}
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
			w := &sink{header: make(http.Header), keep: true}
			if err := g.serveModelgate(w, g.request(w, "/v1/chat/completions", chatWith(tc.model, "", "hi"), header...)); err != nil {
				t.Fatal(err)
			}
			if w.status != tc.status || gjson.Get(w.body.String(), "error.code").Str != tc.code {
				t.Errorf("default provider %q, model %q: %d %s", def, tc.model, w.status, w.body.Bytes())
			}
		}
	}
}
