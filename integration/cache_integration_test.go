package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/providertest"
)

// The secrets of cache.Caddyfile's static keys: two accounts, and a key
// allowed two requests a minute.
const (
	cacheKeyA   = "mg-test-cache-a-0001"
	cacheKeyB   = "mg-test-cache-b-0001"
	cacheKeyRPM = "mg-test-cache-rpm-0001"
)

// startCacheGateway loads cache.Caddyfile (the response cache on, in
// memory) in front of a fake provider, and returns the fake and the
// directory of the logs.
func startCacheGateway(t *testing.T) (*providertest.Server, string) {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	logDir := t.TempDir()
	for k, v := range map[string]string{
		"MG_FAKE": fake.URL, "MG_STORAGE": storageDir(t), "MG_LOG_DIR": logDir,
		"MG_OPENAI_KEY": openAIKey, "MG_ANTHROPIC_KEY": anthropicKey,
		"MG_KEY_A": cacheKeyA, "MG_KEY_B": cacheKeyB, "MG_KEY_RPM": cacheKeyRPM,
	} {
		t.Setenv(k, v)
	}
	cfg, err := os.ReadFile("../testdata/caddyfiles/cache.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return fake, logDir
}

// cachedChat sends a chat request with key and the headers h (name,
// value, …), and returns the status, the body and x-modelgate-cache.
func cachedChat(t *testing.T, key, body string, h ...string) (int, string, string) {
	t.Helper()
	status, b, header := request(t, http.MethodPost, gatewayBase+"/v1/chat/completions", body,
		append([]string{"Authorization", "Bearer " + key}, h...)...)
	return status, b, header.Get("X-Modelgate-Cache")
}

// TestIntegrationCache runs the response cache through Caddy with a real
// Caddyfile: a repeat is a hit and the provider is called once; another
// account misses; Cache-Control bypasses; errors are never stored; a hit
// still authenticates (a wrong key, a revoked one: 401) and counts against
// the rate limits (the third request of a key allowed two, a hit, is
// 429); the usage API counts the hits at $0; the metric and the access
// log say what the cache did.
func TestIntegrationCache(t *testing.T) {
	fake, logDir := startCacheGateway(t)
	calls := func() int { return len(fake.Requests()) }
	body := chatBody("oa/gpt-4o", "cache me", 16)

	t.Run("a repeat is a hit; another account misses", func(t *testing.T) {
		before := calls()
		status, first, c1 := cachedChat(t, cacheKeyA, body)
		_, second, c2 := cachedChat(t, cacheKeyA, body)
		if status != 200 || c1 != "miss" || c2 != "hit" || first != second {
			t.Fatalf("%d %q then %q:\n%s\n%s", status, c1, c2, first, second)
		}
		if _, _, c := cachedChat(t, cacheKeyB, body); c != "miss" {
			t.Errorf("another account: %q, want miss", c)
		}
		if _, _, c := cachedChat(t, cacheKeyA, chatBody("oa/gpt-4o", "cache me", 17)); c != "miss" {
			t.Errorf("another max_tokens: %q, want miss", c)
		}
		if n := calls() - before; n != 3 {
			t.Errorf("the provider was called %d times, want 3", n)
		}
	})

	t.Run("Cache-Control", func(t *testing.T) {
		b := chatBody("oa/gpt-4o", "fresh please", 16)
		before := calls()
		for _, step := range []struct{ cc, want string }{
			{"no-store", "bypass"}, {"", "miss"}, {"", "hit"}, {"no-cache", "bypass"}, {"", "hit"},
		} {
			var h []string
			if step.cc != "" {
				h = []string{"Cache-Control", step.cc}
			}
			if status, res, c := cachedChat(t, cacheKeyA, b, h...); status != 200 || c != step.want {
				t.Fatalf("Cache-Control %q: %d %q %s, want %q", step.cc, status, c, res, step.want)
			}
		}
		if n := calls() - before; n != 3 {
			t.Errorf("the provider was called %d times, want 3", n)
		}
	})

	t.Run("errors are not stored", func(t *testing.T) {
		for _, tc := range []struct {
			body   string
			status int
		}{
			{chatBody("oa/fail-500", "fail", 16), 502},
			{`{"model":"oa/gpt-4o","temperature":5,"messages":[{"role":"user","content":"too hot"}]}`, 400},
		} {
			before := calls()
			for range 2 {
				if status, res, c := cachedChat(t, cacheKeyA, tc.body); status < 400 || c != "miss" {
					t.Fatalf("%d %q %s", status, c, res)
				}
			}
			if n := calls() - before; n != 2 {
				t.Errorf("%s: the provider was called %d times, want 2", tc.body, n)
			}
		}
	})

	t.Run("a hit authenticates", func(t *testing.T) {
		if status, _, _ := cachedChat(t, "mg-test-cache-wrong-0001", body); status != 401 {
			t.Errorf("a wrong key: %d, want 401", status)
		}
		status, res, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"cached","owner":"team-cache"}`)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, res)
		}
		id, secret := gjson.Get(res, "id").Str, gjson.Get(res, "key").Str
		cachedChat(t, secret, body)
		if _, _, c := cachedChat(t, secret, body); c != "hit" {
			t.Fatalf("the managed key's repeat: %q", c)
		}
		if status, res, _ := admin(t, http.MethodDelete, "/modelgate/keys/"+id, ""); status >= 300 {
			t.Fatalf("revoke: %d %s", status, res)
		}
		if status, res, c := cachedChat(t, secret, body); status != 401 || c != "" {
			t.Errorf("a revoked key's cached request: %d %q %s, want 401", status, c, res)
		}
	})

	t.Run("a hit counts against the rate limit", func(t *testing.T) {
		b := chatBody("oa/gpt-4o", "limited", 16)
		for i, want := range []string{"miss", "hit"} {
			if status, res, c := cachedChat(t, cacheKeyRPM, b); status != 200 || c != want {
				t.Fatalf("request %d: %d %q %s", i+1, status, c, res)
			}
		}
		if status, res, _ := cachedChat(t, cacheKeyRPM, b); status != http.StatusTooManyRequests ||
			gjson.Get(res, "error.code").Str != "rate_limit_exceeded" {
			t.Errorf("the third request: %d %s, want 429", status, res)
		}
	})

	t.Run("usage counts the hits", func(t *testing.T) {
		status, res, _ := admin(t, http.MethodGet, "/modelgate/usage?key_id=static:k-rpm", "")
		tot := gjson.Get(res, "total")
		if status != 200 || tot.Get("requests").Int() != 2 || tot.Get("cache_hits").Int() != 1 {
			t.Fatalf("usage of k-rpm: %d %s", status, res)
		}
		// The hit is priced at cache_hit, $0 by default: the cost is the
		// miss's alone.
		in, out := tot.Get("input_tokens").Int()/2, tot.Get("output_tokens").Int()/2
		if want := pricing.Money(in*2500 + out*10000).String(); tot.Get("cost_usd").Str != want {
			t.Errorf("cost %s, want %s (the miss alone)", tot.Get("cost_usd").Str, want)
		}
	})

	t.Run("the metric", func(t *testing.T) {
		m := scrapeMetrics(t)
		for _, status := range []string{"hit", "miss", "bypass"} {
			if metricValue(m, `caddy_modelgate_cache_requests_total{api="chat_completions",status="`+status+`"}`) == 0 {
				t.Errorf("no %s in:\n%s", status, m)
			}
		}
	})

	// Loading another config closes this one's log files.
	caddytest.NewTester(t).InitServer(`{
		admin localhost:2999
		http_port 9080
	}`, "caddyfile")
	access, err := os.ReadFile(filepath.Join(logDir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(string(access), "\n") {
		if c := gjson.Get(line, "modelgate_cache").Str; c != "" {
			seen[c] = true
		}
	}
	if !seen["hit"] || !seen["miss"] || !seen["bypass"] {
		t.Errorf("modelgate_cache in the access log: %v", seen)
	}
}

// TestIntegrationCacheStreamsSDK: a streamed request for a cached answer
// is replayed as the API's events, read by the real SDKs — openai-go's
// chat stream (with and without the usage chunk) and Responses stream,
// the Anthropic SDK's Messages stream — as the answer a plain request
// got; the reverse (a stream stored, then a plain request) too.
func TestIntegrationCacheStreamsSDK(t *testing.T) {
	fake, _ := startCacheGateway(t)
	ctx := context.Background()
	calls := func() int { return len(fake.Requests()) }
	oc := sdk(cacheKeyA)

	t.Run("chat", func(t *testing.T) {
		params := userChat("oa/gpt-4o", "stream me from the cache")
		plain, err := oc.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		before := calls()
		for _, usage := range []bool{false, true} {
			p := params
			if usage {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			var res *http.Response
			s := oc.Chat.Completions.NewStreaming(ctx, p, option.WithResponseInto(&res))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if res.Header.Get("X-Modelgate-Cache") != "hit" || len(acc.Choices) != 1 ||
				acc.Choices[0].Message.Content != plain.Choices[0].Message.Content || acc.Choices[0].FinishReason != "stop" {
				t.Errorf("include_usage %v: %q %+v, want %q", usage, res.Header.Get("X-Modelgate-Cache"), acc.Choices, plain.Choices[0].Message.Content)
			}
			if usage && acc.Usage.PromptTokens != plain.Usage.PromptTokens {
				t.Errorf("the usage chunk %+v, want %+v", acc.Usage, plain.Usage)
			}
		}
		if n := calls() - before; n != 0 {
			t.Errorf("the provider was called %d times", n)
		}
	})

	t.Run("chat, streamed then plain", func(t *testing.T) {
		// The gateway stores a streamed answer once the stream has ended,
		// just after the client has its last event. This client reads
		// each answer to its end, as one that reuses its connection does,
		// so that the plain request comes after the store; one that
		// closes the stream at its last event and opens a new connection
		// may outrun it (docs/cache.md).
		oc := sdk(cacheKeyA, option.WithHTTPClient(&http.Client{Transport: drainingTransport{http.DefaultTransport}}))
		params := userChat("claude/claude-sonnet-4-5", "stream me first")
		s := oc.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		var res *http.Response
		plain, err := oc.Chat.Completions.New(ctx, params, option.WithResponseInto(&res))
		if err != nil {
			t.Fatal(err)
		}
		if res.Header.Get("X-Modelgate-Cache") != "hit" || plain.Choices[0].Message.Content != acc.Choices[0].Message.Content {
			t.Errorf("%q: %q, want %q", res.Header.Get("X-Modelgate-Cache"), plain.Choices[0].Message.Content, acc.Choices[0].Message.Content)
		}
	})

	t.Run("responses", func(t *testing.T) {
		params := responses.ResponseNewParams{Model: "oa/gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a cached response")}}
		plain, err := oc.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		before := calls()
		s := oc.Responses.NewStreaming(ctx, params)
		var done *responses.Response
		text := ""
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed":
				r := ev.Response
				done = &r
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if done == nil || done.OutputText() != plain.OutputText() || text != plain.OutputText() || done.ID != plain.ID {
			t.Errorf("streamed %q (%+v), want %q", text, done, plain.OutputText())
		}
		if n := calls() - before; n != 0 {
			t.Errorf("the provider was called %d times", n)
		}
	})

	t.Run("messages", func(t *testing.T) {
		ac := anthropic.NewClient(aoption.WithBaseURL(gatewayBase), aoption.WithAPIKey(cacheKeyA), aoption.WithMaxRetries(0))
		p := anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-5", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("a cached message"))}}
		plain, err := ac.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		before := calls()
		s := ac.Messages.NewStreaming(ctx, p)
		var acc anthropic.Message
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != plain.Content[0].Text || acc.StopReason != plain.StopReason ||
			acc.Usage.OutputTokens != plain.Usage.OutputTokens || acc.ID != plain.ID {
			t.Errorf("streamed %+v, answered %+v", acc, plain)
		}
		if n := calls() - before; n != 0 {
			t.Errorf("the provider was called %d times", n)
		}
		// The Anthropic SDK's error on a wrong key, cached or not.
		bad := anthropic.NewClient(aoption.WithBaseURL(gatewayBase), aoption.WithAPIKey("mg-test-cache-wrong-0001"), aoption.WithMaxRetries(0))
		var aErr *anthropic.Error
		if _, err := bad.Messages.New(ctx, p); !errors.As(err, &aErr) || aErr.StatusCode != 401 {
			t.Errorf("a wrong key: %v", err)
		}
	})
}

// drainingTransport reads each response to its end before closing it.
type drainingTransport struct{ http.RoundTripper }

func (t drainingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		res.Body = drainOnClose{res.Body}
	}
	return res, err
}

// drainOnClose is a response body that is read to its end when closed.
type drainOnClose struct{ io.ReadCloser }

func (b drainOnClose) Close() error {
	_, _ = io.Copy(io.Discard, b.ReadCloser)
	return b.ReadCloser.Close()
}
