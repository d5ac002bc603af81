package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The static keys of testdata/caddyfiles/limits.Caddyfile, one per limit.
const (
	rpmKey   = "mg-test-limits-rpm-0001"
	tpmKey   = "mg-test-limits-tpm-0001"
	concKey  = "mg-test-limits-conc-0001"
	spentKey = "mg-test-limits-spent-0001"
	freeKey  = "mg-test-limits-free-0001"
)

// startLimitsGateway runs limits.Caddyfile against a fake provider.
func startLimitsGateway(t *testing.T) *providertest.Server {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	for k, v := range map[string]string{
		"MG_FAKE": fake.URL, "MG_STORAGE": storageDir(t), "MG_LOG_DIR": t.TempDir(),
		"MG_OPENAI_KEY": openAIKey, "MG_ANTHROPIC_KEY": anthropicKey,
		"MG_KEY_RPM": rpmKey, "MG_KEY_TPM": tpmKey, "MG_KEY_CONC": concKey, "MG_KEY_SPENT": spentKey, "MG_KEY_FREE": freeKey,
	} {
		t.Setenv(k, v)
	}
	cfg, err := os.ReadFile("../testdata/caddyfiles/limits.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return fake
}

// chatBody is a chat request for model with max_tokens (0: none).
func chatBody(model, text string, maxTokens int) string {
	mt := ""
	if maxTokens > 0 {
		mt = `,"max_tokens":` + strconv.Itoa(maxTokens)
	}
	return fmt.Sprintf(`{"model":%q%s,"messages":[{"role":"user","content":%q}]}`, model, mt, text)
}

func chat(t *testing.T, key, body string) (int, string, http.Header) {
	t.Helper()
	return request(t, http.MethodPost, gatewayBase+"/v1/chat/completions", body, "Authorization", "Bearer "+key)
}

// gpt4oCost is what an answer's usage costs at gpt-4o's shipped price
// ($2.50 and $10 per million input and output tokens), in dollars.
func gpt4oCost(body string) float64 {
	return float64(gjson.Get(body, "usage.prompt_tokens").Int())*2.5e-6 + float64(gjson.Get(body, "usage.completion_tokens").Int())*10e-6
}

// TestIntegrationRateLimits: requests and tokens per minute and concurrent
// requests of a key, over the OpenAI and the Anthropic API, as the SDKs
// see them: 429 with retry-after and the rate-limit headers.
func TestIntegrationRateLimits(t *testing.T) {
	fake := startLimitsGateway(t)
	ctx := context.Background()

	t.Run("requests per minute", func(t *testing.T) {
		for i := range 3 {
			status, body, h := chat(t, rpmKey, chatBody("oa/gpt-4o", "count me", 0))
			if status != 200 || h.Get("X-Ratelimit-Limit-Requests") != "3" || h.Get("X-Ratelimit-Remaining-Requests") != strconv.Itoa(2-i) {
				t.Fatalf("request %d: %d %s %v", i+1, status, body, h)
			}
			// Sliding windows: what counts now has drained within two minutes.
			if d, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-Requests")); err != nil || d <= 0 || d > 2*time.Minute {
				t.Errorf("x-ratelimit-reset-requests %q", h.Get("X-Ratelimit-Reset-Requests"))
			}
		}
		before := len(fake.Requests())
		c := sdk(rpmKey)
		_, err := c.Chat.Completions.New(ctx, userChat("oa/gpt-4o", "one too many"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Type != "rate_limit_error" {
			t.Fatalf("the 4th request of the minute: %v", err)
		}
		h := apiErr.Response.Header
		ra, _ := strconv.Atoi(h.Get("Retry-After"))
		ms, _ := strconv.Atoi(h.Get("Retry-After-Ms"))
		if ra < 1 || ra > 60 || ms <= 0 || ms > 60_000 || h.Get("X-Ratelimit-Remaining-Requests") != "0" {
			t.Errorf("headers of the refusal: %v", h)
		}
		if !strings.Contains(apiErr.Message, `key "k-rpm"`) {
			t.Errorf("message %q does not say whose limit", apiErr.Message)
		}
		// Anthropic's shape and headers on /v1/messages.
		ac := anthropicClient(rpmKey)
		_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-5", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var aErr *anthropic.Error
		if !errors.As(err, &aErr) || aErr.StatusCode != 429 || !strings.Contains(aErr.RawJSON(), `"type":"rate_limit_error"`) ||
			aErr.Response.Header.Get("Anthropic-Ratelimit-Requests-Limit") != "3" || aErr.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("over the limit on /v1/messages: %v", err)
		}
		if reset, err := time.Parse(time.RFC3339, aErr.Response.Header.Get("Anthropic-Ratelimit-Requests-Reset")); err != nil || reset.Before(time.Now().Add(-time.Second)) {
			t.Errorf("anthropic-ratelimit-requests-reset %q", aErr.Response.Header.Get("Anthropic-Ratelimit-Requests-Reset"))
		}
		if n := len(fake.Requests()) - before; n != 0 {
			t.Errorf("refused requests reached the provider %d times", n)
		}
		// Another key has its own count.
		if status, body, _ := chat(t, freeKey, chatBody("oa/gpt-4o", "not limited", 0)); status != 200 {
			t.Errorf("another key: %d %s", status, body)
		}
	})

	t.Run("tokens per minute: estimated, then corrected by the answer", func(t *testing.T) {
		// A request whose maximum alone passes the limit can never fit:
		// no retry-after, and the SDKs are told not to retry.
		status, body, h := chat(t, tpmKey, chatBody("oa/gpt-4o", "too big", 500))
		if status != 429 || gjson.Get(body, "error.code").Str != "rate_limit_exceeded" || h.Get("Retry-After") != "" || h.Get("X-Should-Retry") != "false" {
			t.Fatalf("a request over the limit by itself: %d %s %v", status, body, h)
		}
		// 300 of 400 are reserved for each of these; the answer uses a
		// few, and the rest is given back, so the next one fits too.
		for i := range 3 {
			status, body, h := chat(t, tpmKey, chatBody("oa/gpt-4o", "short", 300))
			if status != 200 || h.Get("X-Ratelimit-Limit-Tokens") != "400" {
				t.Fatalf("request %d: %d %s", i+1, status, body)
			}
			if rem, _ := strconv.Atoi(h.Get("X-Ratelimit-Remaining-Tokens")); rem >= 400-300 || rem < 0 {
				t.Errorf("request %d: %d tokens remaining after its estimate was counted", i+1, rem)
			}
		}
	})

	t.Run("concurrent requests", func(t *testing.T) {
		before := len(fake.Requests())
		first := make(chan int, 1)
		go func() {
			status, _, _ := chat(t, concKey, chatBody("oa/slow-400ms", "take your time", 0))
			first <- status
		}()
		for len(fake.Requests()) == before {
			time.Sleep(5 * time.Millisecond)
		}
		status, body, h := chat(t, concKey, chatBody("oa/gpt-4o", "me too", 0))
		if status != 429 || h.Get("Retry-After") != "1" || !strings.Contains(gjson.Get(body, "error.message").Str, "concurrent") {
			t.Errorf("a second request in flight: %d %s %v", status, body, h)
		}
		if s := <-first; s != 200 {
			t.Fatalf("the first request: %d", s)
		}
		if status, body, _ := chat(t, concKey, chatBody("oa/gpt-4o", "my turn", 0)); status != 200 {
			t.Errorf("after the first ended: %d %s", status, body)
		}
	})

	t.Run("refusals are counted in the metrics", func(t *testing.T) {
		m := scrapeMetrics(t)
		for _, s := range []string{
			`caddy_modelgate_limit_refusals_total{limit="requests",scope="key"}`,
			`caddy_modelgate_limit_refusals_total{limit="tokens",scope="key"}`,
			`caddy_modelgate_limit_refusals_total{limit="concurrent",scope="key"}`,
		} {
			if metricValue(m, s) < 1 {
				t.Errorf("%s not counted:\n%s", s, m)
			}
		}
	})
}

// TestIntegrationBudgets: budgets of keys and owners refuse with
// insufficient_quota once spent, never count a model without a price as
// free, hold against a burst of concurrent requests from two keys of one
// owner, and count batch lines.
func TestIntegrationBudgets(t *testing.T) {
	fake := startLimitsGateway(t)
	ctx := context.Background()

	t.Run("a key's total budget", func(t *testing.T) {
		spent := 0.0
		for i := 0; ; i++ {
			if i == 10 {
				t.Fatal("a $0.0003 budget admitted 10 requests")
			}
			status, body, h := chat(t, spentKey, chatBody("oa/gpt-4o", "spend a little", 5))
			if status == 200 {
				spent += gpt4oCost(body)
				continue
			}
			if status != 429 || gjson.Get(body, "error.type").Str != "insufficient_quota" || gjson.Get(body, "error.code").Str != "insufficient_quota" ||
				h.Get("X-Should-Retry") != "false" || h.Get("Retry-After") != "" {
				t.Fatalf("refusal %d: %d %s %v", i, status, body, h)
			}
			if i == 0 {
				t.Fatal("refused before anything was spent")
			}
			break
		}
		if spent > 0.0003 {
			t.Errorf("spent $%f of a $0.0003 budget", spent)
		}
		// The OpenAI SDK, with its retries on, does not retry a budget.
		before := len(fake.Requests())
		c := openai.NewClient(option.WithBaseURL(gatewayV1), option.WithAPIKey(spentKey), option.WithMaxRetries(2))
		_, err := c.Chat.Completions.New(ctx, userChat("oa/gpt-4o", "still there?"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "insufficient_quota" {
			t.Fatalf("SDK: %v", err)
		}
		if len(fake.Requests()) != before {
			t.Error("a refused request reached the provider")
		}
	})

	t.Run("a model without a price is refused under a budget", func(t *testing.T) {
		status, body, _ := chat(t, spentKey, chatBody("oa/my-own-finetune", "free?", 0))
		if status != 403 || gjson.Get(body, "error.code").Str != "model_not_priced" || gjson.Get(body, "error.param").Str != "model" {
			t.Errorf("%d %s", status, body)
		}
		// Without a budget it is served, and counted as unpriced.
		if status, body, _ := chat(t, freeKey, chatBody("oa/my-own-finetune", "free?", 0)); status != 200 {
			t.Errorf("without a budget: %d %s", status, body)
		}
	})

	t.Run("a burst at a nearly spent owner budget", func(t *testing.T) {
		// Two keys of team-b share its $0.002 a day. Spend some of it,
		// then fire 40 slow requests at once, 20 from each key: each
		// reserves its estimate before it is sent, so together they
		// cannot pass the budget.
		secrets := make([]string, 2)
		for i := range secrets {
			status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", fmt.Sprintf(`{"name":"burst-%d","owner":"team-b"}`, i))
			if status != http.StatusCreated {
				t.Fatalf("create: %d %s", status, body)
			}
			secrets[i] = gjson.Get(body, "key").Str
		}
		spent := 0.0
		for range 4 {
			status, body, _ := chat(t, secrets[0], chatBody("oa/gpt-4o", "warm up", 20))
			if status != 200 {
				t.Fatalf("warming up: %d %s", status, body)
			}
			spent += gpt4oCost(body)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		admitted, refused := 0, 0
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body, h := chat(t, secrets[i%2], chatBody("oa/slow-400ms", "a burst of requests", 20))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case status == 200:
					admitted++
					spent += gpt4oCost(body)
				case status == 429 && gjson.Get(body, "error.code").Str == "insufficient_quota" && h.Get("X-Should-Retry") == "false":
					refused++
				default:
					t.Errorf("%d %s", status, body)
				}
			}()
		}
		wg.Wait()
		t.Logf("burst: %d admitted, %d refused, $%.6f of $0.002 spent", admitted, refused, spent)
		if admitted == 0 || refused == 0 {
			t.Errorf("%d admitted, %d refused: the budget should admit some and refuse the rest", admitted, refused)
		}
		// Every estimate (the prompt and max_tokens at the model's price)
		// is at least its cost, so the budget is never passed.
		if spent > 0.002 {
			t.Errorf("spent $%f of a $0.002 budget", spent)
		}
	})

	t.Run("batch lines count against the budget, without retries", func(t *testing.T) {
		status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"batcher","owner":"team-c","budget":{"usd":"0.0002","period":"total"}}`)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, body)
		}
		c := sdk(gjson.Get(body, "key").Str)
		var lines []string
		for i := range 12 {
			lines = append(lines, fmt.Sprintf(`{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":%s}`, i, chatBody("oa/gpt-4o", "a batch line", 5)))
		}
		before := len(fake.Requests())
		b := waitBatch(t, c, newBatch(t, c, uploadLines(t, c, lines).ID, "/v1/chat/completions").ID, 30*time.Second, "completed", "failed")
		ok, failed := 0, 0
		spent := 0.0
		for _, l := range fileLines(t, c, b.OutputFileID) {
			ok++
			spent += gpt4oCost(l.Get("response.body").Raw)
		}
		for _, l := range fileLines(t, c, b.ErrorFileID) {
			failed++
			if l.Get("response.status_code").Int() != 429 || l.Get("response.body.error.code").Str != "insufficient_quota" {
				t.Errorf("error line %s", l.Raw)
			}
		}
		if ok == 0 || failed == 0 || ok+failed != 12 || spent > 0.0002 {
			t.Errorf("%d lines answered, %d failed, $%f spent", ok, failed, spent)
		}
		if n := len(fake.Requests()) - before; n != ok {
			t.Errorf("the provider got %d requests for %d answered lines: refused lines were retried or sent", n, ok)
		}
	})

	t.Run("budget refusals are counted in the metrics", func(t *testing.T) {
		m := scrapeMetrics(t)
		for _, s := range []string{
			`caddy_modelgate_limit_refusals_total{limit="budget",scope="key"}`,
			`caddy_modelgate_limit_refusals_total{limit="budget",scope="owner"}`,
			`caddy_modelgate_limit_refusals_total{limit="unpriced",scope="key"}`,
		} {
			if metricValue(m, s) < 1 {
				t.Errorf("%s not counted:\n%s", s, m)
			}
		}
	})
}
