package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The static keys of testdata/caddyfiles/estimate.Caddyfile.
const (
	cjkKey        = "mg-test-estimate-cjk-0001"
	jsonKey       = "mg-test-estimate-json-0001"
	answersKey    = "mg-test-estimate-answers-0001"
	answersTPMKey = "mg-test-estimate-answers-tpm-0001"
)

// startEstimateGateway runs estimate.Caddyfile against a fake provider
// that counts prompts with o200k_base, the tokenizer of gpt-4o-mini (from
// tiktoken-go, which embeds its ranks: a dependency of these tests only),
// rather than in words, which would count a prompt without a space as one
// token.
func startEstimateGateway(t *testing.T) (*providertest.Server, func(string) int) {
	t.Helper()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int {
		ids, _, err := enc.Encode(s)
		if err != nil {
			t.Errorf("o200k_base: %v", err)
		}
		return len(ids)
	}
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, PromptTokens: count})
	for k, v := range map[string]string{
		"MG_FAKE": fake.URL, "MG_STORAGE": storageDir(t), "MG_LOG_DIR": t.TempDir(), "MG_OPENAI_KEY": openAIKey,
		"MG_KEY_CJK": cjkKey, "MG_KEY_JSON": jsonKey, "MG_KEY_ANSWERS": answersKey, "MG_KEY_ANSWERS_TPM": answersTPMKey,
	} {
		t.Setenv(k, v)
	}
	cfg, err := os.ReadFile("../testdata/caddyfiles/estimate.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return fake, count
}

// shots sends n chat requests of key at once and returns their statuses,
// bodies and headers.
func shots(t *testing.T, key, body string, n int) (status []int, bodies []string, headers []http.Header) {
	status, bodies, headers = make([]int, n), make([]string, n), make([]http.Header, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { status[i], bodies[i], headers[i] = chat(t, key, body) })
	}
	wg.Wait()
	return status, bodies, headers
}

// miniCost is what an answer's usage costs at gpt-4o-mini's price ($0.15
// and $0.60 a million input and output tokens), in dollars.
func miniCost(body string) float64 {
	return float64(gjson.Get(body, "usage.prompt_tokens").Int())*0.15e-6 + float64(gjson.Get(body, "usage.completion_tokens").Int())*0.6e-6
}

// TestIntegrationEstimateLimits: what limits and budgets count up front
// is at least what the provider then counts, so neither is passed by more
// than one request's worth, whatever the text and however many answers a
// request asks for. The fake provider counts prompts with o200k_base.
//
//   - ten requests of 20 KiB of Chinese prose at once, against a $0.003
//     budget (the gateway took each for an image of 1,600 tokens, admitted
//     all ten and spent about twice the budget);
//   - ten requests of 12 KiB of minified JSON at once, against 20,000
//     tokens a minute (estimated at 1,600 tokens each, all ten were
//     admitted, about 50,000 tokens);
//   - n: 128 with max_tokens 16,000, against a $0.01 budget and against
//     20,000 tokens a minute: refused up front (it was estimated as one
//     answer: $0.0096, 16,000 tokens);
//   - an unknown model under a budget is 404 model_not_found, though the
//     default provider takes every bare name.
func TestIntegrationEstimateLimits(t *testing.T) {
	fake, count := startEstimateGateway(t)
	ctx := context.Background()

	t.Run("ten 20 KiB CJK requests at once against a $0.003 budget", func(t *testing.T) {
		const budget = 0.003
		prose := strings.Repeat("人工智能正在改变我们的生活方式。从医疗诊断到自动驾驶，从语音助手到机器翻译，这项技术的应用越来越广泛。", 140)[:20<<10/3*3]
		body := chatBody("oa/slow-300ms", prose, 16)
		// What one request costs, as the provider counts it.
		one := float64(count(prose))*0.15e-6 + 16*0.6e-6
		before := len(fake.Requests())
		status, bodies, _ := shots(t, cjkKey, body, 10)
		spent, admitted := 0.0, 0
		for i := range status {
			switch msg := gjson.Get(bodies[i], "error.message").Str; {
			case status[i] == 200:
				admitted++
				spent += miniCost(bodies[i])
			case status[i] != 429 || gjson.Get(bodies[i], "error.code").Str != "insufficient_quota" ||
				!strings.Contains(msg, "This request, estimated at $") || strings.Contains(msg, "exceeded"):
				t.Errorf("request %d: %d %s", i, status[i], bodies[i])
			}
		}
		t.Logf("%d of 10 admitted, $%.6f spent of $%v; one request costs $%.6f", admitted, spent, budget, one)
		if spent > budget+one {
			t.Errorf("spent $%.6f of a $%v budget: more than one request's worth ($%.6f) over", spent, budget, one)
		}
		if n := len(fake.Requests()) - before; n != admitted {
			t.Errorf("the provider got %d requests for %d admitted", n, admitted)
		}
		// The budget is not spent: a short request still fits.
		if status, body, _ := chat(t, cjkKey, chatBody("oa/slow-300ms", "你好", 16)); status != 200 {
			t.Errorf("a short request: %d %s", status, body)
		}
	})

	t.Run("ten 12 KiB minified JSON requests at once against 20,000 tokens a minute", func(t *testing.T) {
		const limit = 20000
		var b strings.Builder
		for i := 0; b.Len() < 12<<10; i++ {
			fmt.Fprintf(&b, `{"id":%d,"sku":"W-%05d","name":"Widget %d","tags":["a%d","b%d"],"price":%d.%02d,"stock":%d,"ok":%t},`,
				i, i*37%100000, i, i%7, i%11, i%500, i%100, i*13%1000, i%2 == 0)
		}
		body := chatBody("oa/slow-300ms", b.String(), 16)
		one := count(b.String()) + 16
		status, bodies, headers := shots(t, jsonKey, body, 10)
		tokens, admitted := 0, 0
		for i := range status {
			switch {
			case status[i] == 200:
				admitted++
				tokens += int(gjson.Get(bodies[i], "usage.total_tokens").Int())
			case status[i] != 429 || gjson.Get(bodies[i], "error.code").Str != "rate_limit_exceeded" || headers[i].Get("X-Ratelimit-Limit-Tokens") != "20000":
				t.Errorf("request %d: %d %s %v", i, status[i], bodies[i], headers[i])
			}
		}
		t.Logf("%d of 10 admitted, %d tokens of %d a minute; one request is %d", admitted, tokens, limit, one)
		if admitted == 0 {
			t.Error("no request admitted: each fits the limit by itself")
		}
		if tokens > limit+one {
			t.Errorf("%d tokens let through against %d a minute: more than one request's worth (%d) over", tokens, limit, one)
		}
	})

	t.Run("n 128 with max_tokens 16,000 against a $0.01 budget and 20,000 tokens a minute", func(t *testing.T) {
		params := userChat("oa/gpt-4o-mini", "write me a long story")
		params.N, params.MaxTokens = openai.Int(128), openai.Int(16000)
		before := len(fake.Requests())
		var apiErr *openai.Error
		budgeted, limited := sdk(answersKey), sdk(answersTPMKey)
		_, err := budgeted.Chat.Completions.New(ctx, params)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "insufficient_quota" ||
			!strings.Contains(apiErr.Message, "This request, estimated at $1.2") || !strings.Contains(apiErr.Message, `more than the whole budget of key "k-answers" ($0.01 per day)`) {
			t.Errorf("against the budget: %v", err)
		}
		_, err = limited.Chat.Completions.New(ctx, params)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" ||
			!strings.Contains(apiErr.Message, "Request too large for tokens per minute") || apiErr.Response.Header.Get("Retry-After") != "" {
			t.Errorf("against tokens per minute: %v", err)
		}
		if n := len(fake.Requests()) - before; n != 0 {
			t.Errorf("refused requests reached the provider %d times", n)
		}
		// Two answers of 1,000 tokens fit both.
		params.N, params.MaxTokens = openai.Int(2), openai.Int(1000)
		for _, c := range []*openai.Client{&budgeted, &limited} {
			if _, err := c.Chat.Completions.New(ctx, params); err != nil {
				t.Errorf("n 2, max_tokens 1,000: %v", err)
			}
		}
	})

	t.Run("an unknown model under a budget is not found", func(t *testing.T) {
		for _, tc := range []struct {
			model  string
			status int
			code   string
		}{
			{"no-such-model", 404, "model_not_found"},     // only the default provider would take it
			{"oa/no-such-model", 403, "model_not_priced"}, // the client named the provider
		} {
			if status, body, _ := chat(t, answersKey, chatBody(tc.model, "hi", 5)); status != tc.status || gjson.Get(body, "error.code").Str != tc.code {
				t.Errorf("%s: %d %s", tc.model, status, body)
			}
		}
	})
}
