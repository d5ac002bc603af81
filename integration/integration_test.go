package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/caddykit"
	"github.com/modelgate/modelgate/providers/providertest"
)

// Secrets of the integration gateway. None may ever reach a log line, an
// error body or the wrong party.
const (
	aliceKey        = "mg-test-alice-key-7f3a9c2e"
	bobKey          = "mg-test-bob-literal-key-0001"
	openAIKey       = "sk-test-openai-provider-key-51c0"
	anthropicKey    = "sk-ant-test-provider-key-9d2b"
	gatewayBase     = "http://localhost:9080"
	gatewayV1       = gatewayBase + "/v1/"
	gatewayCaddyfil = "../testdata/caddyfiles/gateway.Caddyfile"
)

func TestMain(m *testing.M) {
	// caddytest runs Caddy in this process; keep its autosave and instance
	// files out of the user's directories.
	dir, err := os.MkdirTemp("", "modelgate-caddygateway-test")
	if err != nil {
		panic(err)
	}
	testRoot = dir
	caddykit.Isolate(dir)
	_ = os.Setenv("NO_PROXY", "127.0.0.1,localhost,::1") // a valid name: it cannot fail
	if err := caddykit.AwaitFreeAdmin(2 * time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir) // a temporary directory: what is left is only litter
	os.Exit(code)
}

// testRoot is the directory TestMain removes when every test has run.
var testRoot string

// storageDir is a fresh directory for a caddytest gateway's storage. Not
// t.TempDir: the config a test loads keeps running after the test ends
// (until the next test loads another), and its usage recorder may write
// to the storage just as t.TempDir's cleanup removes it. TestMain removes
// these at the end.
func storageDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(testRoot, "storage-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// gateway is a running modelgate in front of a fake provider.
type gateway struct {
	fake   *providertest.Server
	logDir string
}

// startGateway starts a fake provider and loads testdata's gateway
// Caddyfile in front of it.
func startGateway(t *testing.T) *gateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	g := &gateway{fake: fake, logDir: t.TempDir()}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	cfg, err := os.ReadFile(gatewayCaddyfil)
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return g
}

// sdk is an OpenAI client of the gateway with key; opts come after its
// own (another HTTP client, say).
func sdk(key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(gatewayV1),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20 * time.Second),
	}, opts...)...)
}

// post sends a raw request to the gateway.
func post(t *testing.T, path, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gatewayBase+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// request sends one request to url, with body as JSON when there is one
// and header as name, value pairs, and returns the status, the body and
// the headers of the answer.
func request(t *testing.T, method, url, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// statusWith returns the status of GET url with secret as the bearer key.
func statusWith(t *testing.T, url, secret string) int {
	t.Helper()
	status, _, _ := request(t, http.MethodGet, url, "", "Authorization", "Bearer "+secret)
	return status
}

// waitStatusWith polls GET url with secret until it answers want, for at
// most limit, and returns how long that took.
func waitStatusWith(t *testing.T, url, secret string, want int, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		status := statusWith(t, url, secret)
		if status == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("waiting for %s: status %d after %v, want %d", what, status, time.Since(start), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantErrorShape asserts an OpenAI error body with the given status and code.
func wantErrorShape(t *testing.T, res *http.Response, status int, code string) gjson.Result {
	t.Helper()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, body)
	}
	e := gjson.GetBytes(body, "error")
	for _, k := range []string{"message", "type", "param", "code"} {
		if !e.Get(k).Exists() {
			t.Fatalf("error body lacks %q: %s", k, body)
		}
	}
	if e.Get("message").Str == "" {
		t.Fatalf("error has no message: %s", body)
	}
	if code != "" && e.Get("code").Str != code {
		t.Fatalf("code %q, want %q: %s", e.Get("code").Str, code, body)
	}
	return e
}

func userChat(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(text)},
	}
}

var searchTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "search",
	Description: openai.String("search the web"),
	Parameters: openai.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"query": map[string]any{"type": "string"}},
		"required":   []string{"query"},
	},
})

func TestIntegrationChatSDK(t *testing.T) {
	g := startGateway(t)
	client := sdk(aliceKey)
	ctx := context.Background()

	for _, tc := range []struct {
		model, upstreamModel, path string
	}{
		{"oa/gpt-4o-mini", "gpt-4o-mini", "/v1/chat/completions"},
		{"gpt-4o-mini", "gpt-4o-mini", "/v1/chat/completions"}, // bare name from the models list
		{"claude/claude-sonnet-4-5", "claude-sonnet-4-5", "/v1/messages"},
		{"smart", "claude-sonnet-4-5", "/v1/messages"}, // alias, first target
	} {
		t.Run(tc.model, func(t *testing.T) {
			before := len(g.fake.Requests())
			res, err := client.Chat.Completions.New(ctx, userChat(tc.model, "hello gateway"))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Choices[0].Message.Content; got != "echo: hello gateway" {
				t.Errorf("content %q", got)
			}
			if res.Choices[0].FinishReason != "stop" {
				t.Errorf("finish_reason %q", res.Choices[0].FinishReason)
			}
			if res.Usage.PromptTokens == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
				t.Errorf("usage %+v", res.Usage)
			}
			reqs := g.fake.Requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("fake saw %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Path != tc.path || r.Model != tc.upstreamModel {
				t.Errorf("upstream got %s model %q", r.Path, r.Model)
			}
			assertNoGatewayKey(t, r)
		})
	}
}

// assertNoGatewayKey checks that a provider request carries the provider's
// own key in its own header and nothing of the client's.
func assertNoGatewayKey(t *testing.T, r providertest.Recorded) {
	t.Helper()
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, aliceKey) || strings.Contains(v, bobKey) {
				t.Errorf("the gateway key reached the provider in %s", k)
			}
		}
	}
	if strings.Contains(string(r.Body), aliceKey) {
		t.Error("the gateway key reached the provider in the body")
	}
	switch r.Path {
	case "/v1/messages":
		if r.Header.Get("X-Api-Key") != anthropicKey || r.Header.Get("Authorization") != "" {
			t.Errorf("anthropic auth headers: x-api-key %q, authorization %q", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
		}
	default:
		if r.Header.Get("Authorization") != "Bearer "+openAIKey {
			t.Errorf("openai auth header %q", r.Header.Get("Authorization"))
		}
	}
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Via"} {
		if r.Header.Get(h) != "" {
			t.Errorf("provider saw %s: %q", h, r.Header.Get(h))
		}
	}
}

func TestIntegrationStreamingToolCallsSDK(t *testing.T) {
	g := startGateway(t)
	client := sdk(aliceKey)
	for _, model := range []string{"oa/gpt-4o", "claude/claude-sonnet-4-5"} {
		t.Run(model, func(t *testing.T) {
			params := userChat(model, "weather in Paris")
			params.Tools = []openai.ChatCompletionToolUnionParam{searchTool}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			chunks := 0
			for stream.Next() {
				acc.AddChunk(stream.Current())
				chunks++
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if chunks < 3 {
				t.Errorf("only %d chunks", chunks)
			}
			msg := acc.Choices[0].Message
			if len(msg.ToolCalls) != 1 {
				t.Fatalf("tool calls %+v", msg.ToolCalls)
			}
			tc := msg.ToolCalls[0]
			if tc.Function.Name != "search" || tc.ID == "" {
				t.Errorf("tool call %+v", tc)
			}
			if q := gjson.Get(tc.Function.Arguments, "query").Str; q != "weather in Paris" {
				t.Errorf("arguments %q", tc.Function.Arguments)
			}
			if acc.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("finish_reason %q", acc.Choices[0].FinishReason)
			}
			if acc.Usage.TotalTokens == 0 {
				t.Error("include_usage: no usage chunk")
			}
		})
	}

	// The tool's result goes back, and the model answers with text.
	t.Run("tool result round trip", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model: "claude/claude-sonnet-4-5",
			Tools: []openai.ChatCompletionToolUnionParam{searchTool},
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("weather in Paris"),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
					ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID:       "toolu_1",
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "search", Arguments: `{"query":"weather in Paris"}`},
						},
					}},
				}},
				openai.ToolMessage("sunny, 21 C", "toolu_1"),
			},
		}
		client := sdk(aliceKey)
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != "tool said: sunny, 21 C" {
			t.Errorf("content %q", got)
		}
		_ = g
	})
}

func TestIntegrationSDKErrors(t *testing.T) {
	startGateway(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		key    string
		params openai.ChatCompletionNewParams
		status int
		code   string
	}{
		{"bad request", aliceKey, openai.ChatCompletionNewParams{Model: "oa/gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{}}, 400, "invalid_value"},
		{"unknown key", "mg-wrong-key", userChat("oa/gpt-4o", "hi"), 401, "invalid_api_key"},
		{"unknown model", aliceKey, userChat("no-such-model", "hi"), 404, "model_not_found"},
		{"unknown provider prefix", aliceKey, userChat("nope/gpt-4o", "hi"), 404, "model_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := sdk(tc.key)
			_, err := client.Chat.Completions.New(ctx, tc.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an *openai.Error", err)
			}
			if apiErr.StatusCode != tc.status || apiErr.Code != tc.code {
				t.Errorf("status %d code %q, want %d %q (%s)", apiErr.StatusCode, apiErr.Code, tc.status, tc.code, apiErr.Message)
			}
		})
	}
}

// TestIntegrationStreamingNeverBuffers proves each translated event leaves
// the gateway as soon as the provider sends it: the fake provider sends its
// first content event and then holds the rest back (for up to 10 s, until
// Release). Within 5 s of that, while the provider still holds back, the
// client must have the response headers and the translated first event.
func TestIntegrationStreamingNeverBuffers(t *testing.T) {
	g := startGateway(t)
	for _, model := range []string{"claude/gated", "oa/gated"} {
		t.Run(model, func(t *testing.T) {
			defer g.fake.Release()
			type result struct {
				res *http.Response
				err error
			}
			resCh := make(chan result, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, gatewayBase+"/v1/chat/completions", strings.NewReader(
					`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"one two three"}]}`))
				req.Header.Set("Authorization", "Bearer "+aliceKey)
				res, err := http.DefaultClient.Do(req) //nolint:bodyclose // handed over resCh to the test, which closes it
				resCh <- result{res, err}
			}()
			select {
			case <-g.fake.Waiting():
			case <-time.After(10 * time.Second):
				t.Fatal("the fake provider never reached its gate")
			}
			held := time.Now()

			var res *http.Response
			select {
			case r := <-resCh:
				if r.err != nil {
					t.Fatal(r.err)
				}
				res = r.res
			case <-time.After(5 * time.Second):
				t.Fatal("no response headers while the provider holds back: the gateway buffers")
			}
			defer res.Body.Close()
			if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			events := make(chan string, 64)
			go readEvents(res.Body, events)
			first := nextContent(t, events)
			if time.Since(held) >= 9*time.Second {
				t.Fatal("the first event arrived only after the provider's gate timed out: the gateway buffers")
			}
			if first != "echo:" {
				t.Fatalf("first content %q", first)
			}

			g.fake.Release()
			var rest strings.Builder
			for ev := range events {
				if ev == "[DONE]" {
					break
				}
				rest.WriteString(gjson.Get(ev, "choices.0.delta.content").Str)
			}
			if got := first + rest.String(); got != "echo: one two three" {
				t.Errorf("whole answer %q", got)
			}
		})
	}
}

// readEvents sends each SSE data payload on ch and closes it at the end.
func readEvents(r io.Reader, ch chan<- string) {
	defer close(ch)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			ch <- data
		}
	}
}

// nextContent returns the first non-empty delta content.
func nextContent(t *testing.T, events <-chan string) string {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream ended before any content")
			}
			if c := gjson.Get(ev, "choices.0.delta.content").Str; c != "" {
				return c
			}
		case <-timeout:
			t.Fatal("no content reached the client while the provider waited: the gateway buffers")
		}
	}
}

func TestIntegrationFallback(t *testing.T) {
	g := startGateway(t)
	for _, tc := range []struct {
		model        string
		stream       bool
		wantStatus   int
		wantUpstream []string // models the fake saw, in order
		extra        string   // more request fields
	}{
		{"after-dial-error", false, 200, []string{"claude-sonnet-4-5"}, ""},
		{"after-429", false, 200, []string{"fail-429", "claude-sonnet-4-5"}, ""},
		{"after-500", true, 200, []string{"fail-500", "gpt-4o"}, ""},
		{"after-529", false, 200, []string{"fail-529", "gpt-4o"}, ""},
		{"after-html", false, 200, []string{"fail-html", "claude-sonnet-4-5"}, ""},
		{"all-fail", false, 429, []string{"fail-500", "fail-429"}, ""},
		// Once the stream has reached the client there is no going back.
		{"midstream", true, 200, []string{"midstream-error"}, ""},
		// A target whose provider cannot take the request (Anthropic has
		// no logprobs) is passed over without a call.
		{"smart", false, 200, []string{"gpt-4o"}, `,"logprobs":true`},
	} {
		t.Run(tc.model, func(t *testing.T) {
			before := len(g.fake.Requests())
			res := post(t, "/v1/chat/completions", aliceKey, fmt.Sprintf(
				`{"model":%q,"stream":%t%s,"messages":[{"role":"user","content":"fall back"}]}`, tc.model, tc.stream, tc.extra))
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.wantStatus, body)
			}
			var saw []string
			for _, r := range g.fake.Requests()[before:] {
				saw = append(saw, r.Model)
			}
			if strings.Join(saw, ",") != strings.Join(tc.wantUpstream, ",") {
				t.Errorf("upstream models %v, want %v", saw, tc.wantUpstream)
			}
			switch {
			case tc.wantStatus == 429:
				if res.Header.Get("Retry-After") == "" {
					t.Error("429 without retry-after")
				}
				if gjson.GetBytes(body, "error.type").Str != "rate_limit_error" {
					t.Errorf("error %s", body)
				}
			case tc.model == "midstream":
				if !strings.Contains(string(body), `"error"`) || strings.Contains(string(body), "[DONE]") {
					t.Errorf("a stream broken by the provider must end in an error event, not [DONE]: %s", body)
				}
			case tc.stream:
				if !strings.Contains(string(body), "data: [DONE]") {
					t.Errorf("stream not finished: %s", body)
				}
			default:
				if c := gjson.GetBytes(body, "choices.0.message.content").Str; c != "echo: fall back" {
					t.Errorf("content %q", c)
				}
			}
		})
	}
}

// scrapeMetrics returns the modelgate lines of Caddy's /metrics.
func scrapeMetrics(t *testing.T) string {
	t.Helper()
	res, err := http.Get("http://localhost:2999/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "caddy_modelgate_") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// metricValue returns the value of the sample whose line starts with
// prefix (name and labels), or 0 when there is none or it is not a number.
func metricValue(metrics, prefix string) float64 {
	for _, l := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// metricDelta is how much a sample (name and labels) should have grown.
type metricDelta struct {
	sample string
	delta  float64
}

// waitMetrics scrapes the metrics until every sample has grown by its
// delta since before, for up to 5 s, reports those that have not, and
// returns the last scrape. A request is accounted once its answer's last
// byte is written, so a client may read the whole answer, a stream's end
// included, a moment before the gateway counts it.
func waitMetrics(t *testing.T, before string, want []metricDelta) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := scrapeMetrics(t)
		var wrong []string
		for _, w := range want {
			if d := metricValue(after, w.sample) - metricValue(before, w.sample); d != w.delta {
				wrong = append(wrong, fmt.Sprintf("%s grew by %v, want %v", w.sample, d, w.delta))
			}
		}
		if len(wrong) == 0 {
			return after
		}
		if time.Now().After(deadline) {
			t.Errorf("%s\n%s", strings.Join(wrong, "\n"), after)
			return after
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestIntegrationMetrics(t *testing.T) {
	startGateway(t)
	before := scrapeMetrics(t)
	for _, model := range []string{"after-429", "after-429", "all-fail", "nope"} {
		res := post(t, "/v1/chat/completions", aliceKey, `{"model":"`+model+`","messages":[{"role":"user","content":"count me"}]}`)
		_, _ = io.Copy(io.Discard, res.Body)
	}
	waitMetrics(t, before, []metricDelta{
		{`caddy_modelgate_requests_total{code="200",endpoint="chat_completions",provider="claude"}`, 2},
		{`caddy_modelgate_requests_total{code="429",endpoint="chat_completions",provider=""}`, 1},
		{`caddy_modelgate_requests_total{code="404",endpoint="chat_completions",provider=""}`, 1},
		{`caddy_modelgate_fallbacks_total{provider="oa"}`, 3},
		{`caddy_modelgate_upstream_duration_seconds_count{code="429",provider="oa"}`, 2},
		{`caddy_modelgate_upstream_duration_seconds_count{code="500",provider="oa"}`, 1},
	})

	// Tokens and cost by provider and model, unpriced models counted as
	// such, time to the first token of a stream.
	before = scrapeMetrics(t)
	c := sdk(aliceKey)
	if _, err := c.Chat.Completions.New(context.Background(), userChat("oa/gpt-4o", "count my tokens please")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat.Completions.New(context.Background(), userChat("oa/my-own-finetune", "count me")); err != nil {
		t.Fatal(err)
	}
	s := c.Chat.Completions.NewStreaming(context.Background(), userChat("claude/claude-sonnet-4-5", "stream me"))
	for s.Next() {
	}
	after := waitMetrics(t, before, []metricDelta{
		{`caddy_modelgate_tokens_total{kind="output",model="gpt-4o",provider="oa"}`, 5},
		{`caddy_modelgate_unpriced_requests_total{model="other",provider="oa"}`, 1},
		{`caddy_modelgate_time_to_first_token_seconds_count{provider="claude"}`, 1},
		{`caddy_modelgate_tokens_total{kind="output",model="claude-sonnet-4-5",provider="claude"}`, 3}, // "echo: stream me"
	})
	if d := metricValue(after, `caddy_modelgate_cost_dollars_total{model="gpt-4o",provider="oa"}`) -
		metricValue(before, `caddy_modelgate_cost_dollars_total{model="gpt-4o",provider="oa"}`); d <= 0 {
		t.Errorf("gpt-4o cost nothing:\n%s", after)
	}
}

// TestIntegrationNoFallbackOn4xx: a provider's 400 is the client's to fix,
// so it is returned as it is and the alias's next target is not tried.
func TestIntegrationNoFallbackOn4xx(t *testing.T) {
	g := startGateway(t)
	before := len(g.fake.Requests())
	// The fake OpenAI, like OpenAI, refuses stream_options without stream.
	res := post(t, "/v1/chat/completions", aliceKey,
		`{"model":"all-fail","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	wantErrorShape(t, res, 400, "")
	if n := len(g.fake.Requests()) - before; n != 1 {
		t.Errorf("%d provider calls, want 1: a 400 must not fall back", n)
	}
}

func TestIntegrationBadInput(t *testing.T) {
	startGateway(t)
	big := `{"model":"oa/gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		param      string
	}{
		{"invalid json", `{"model":`, 400, "invalid_json", ""},
		{"not an object", `[1,2]`, 400, "invalid_json", ""},
		{"model not a string", `{"model":5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_value", "model"},
		{"messages not an array", `{"model":"oa/gpt-4o","messages":"hi"}`, 400, "invalid_value", "messages"},
		{"empty messages", `{"model":"oa/gpt-4o","messages":[]}`, 400, "invalid_value", "messages"},
		{"unknown role", `{"model":"oa/gpt-4o","messages":[{"role":"wizard","content":"hi"}]}`, 400, "invalid_value", "messages[0].role"},
		{"stream not bool", `{"model":"oa/gpt-4o","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_value", "stream"},
		{"temperature string", `{"model":"oa/gpt-4o","temperature":"hot","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_value", "temperature"},
		{"too large", big, 413, "request_too_large", ""},
		{"nested too deep", `{"model":"oa/gpt-4o","messages":[{"role":"user","content":"hi"}],"x":` + strings.Repeat("[", 5000) + `}`, 400, "invalid_json", ""},
		{"anthropic cannot n>1", `{"model":"claude/claude-sonnet-4-5","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "unsupported_parameter", "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantErrorShape(t, post(t, "/v1/chat/completions", aliceKey, tc.body), tc.status, tc.code)
			if tc.param != "" && e.Get("param").Str != tc.param {
				t.Errorf("param %q, want %q", e.Get("param").Str, tc.param)
			}
		})
	}

	t.Run("unknown paths under /v1 are OpenAI's 404", func(t *testing.T) {
		for _, path := range []string{"/v1/foo", "/v1/chat/completion", "/v1", "/v1/filesx"} {
			e := wantErrorShape(t, post(t, path, aliceKey, `{}`), 404, "unknown_url")
			if want := "Invalid URL (POST " + path + ")"; e.Get("message").Str != want {
				t.Errorf("message %q, want %q", e.Get("message").Str, want)
			}
		}
		// An SDK call to an endpoint the gateway does not serve is a
		// NotFoundError the SDK can read, not an empty 200.
		c := sdk(aliceKey)
		_, err := c.Moderations.New(context.Background(), openai.ModerationNewParams{
			Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("hi")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Message, "Invalid URL (POST /v1/moderations)") {
			t.Errorf("SDK: %v", err)
		}
		// Paths outside /v1 still go to the next handler (here: none, so
		// Caddy's empty 200).
		if status, body, _ := request(t, http.MethodGet, gatewayBase+"/healthz", "", "Authorization", "Bearer "+aliceKey); status != 200 || body != "" {
			t.Errorf("outside /v1: %d %q", status, body)
		}
	})

	t.Run("wrong method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, gatewayBase+"/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		wantErrorShape(t, res, 405, "method_not_allowed")
	})
}

func TestIntegrationAuth(t *testing.T) {
	startGateway(t)
	body := `{"model":"oa/gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct{ name, header string }{
		{"missing", ""},
		{"not bearer", "Basic " + aliceKey},
		{"empty bearer", "Bearer "},
		{"unknown", "Bearer mg-not-a-key"},
		{"key with suffix", "Bearer " + aliceKey + "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, gatewayBase+"/v1/chat/completions", strings.NewReader(body))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			e := wantErrorShape(t, res, 401, "invalid_api_key")
			if e.Get("type").Str != "invalid_request_error" {
				t.Errorf("type %q", e.Get("type").Str)
			}
		})
	}
	t.Run("literal static key", func(t *testing.T) {
		if res := post(t, "/v1/chat/completions", bobKey, body); res.StatusCode != 200 {
			t.Fatalf("bob's key: status %d", res.StatusCode)
		}
	})
	t.Run("lower-case scheme", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, gatewayBase+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "bearer "+aliceKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}

func TestIntegrationModels(t *testing.T) {
	startGateway(t)
	client := sdk(aliceKey)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	want := "after-429,after-500,after-529,after-dial-error,after-html,all-fail,claude/claude-sonnet-4-5,co/rerank-v3.5,midstream,oa/gpt-4o,oa/gpt-4o-mini,rerank-fallback,smart"
	if strings.Join(ids, ",") != want {
		t.Errorf("models %v", ids)
	}
	m, err := client.Models.Get(context.Background(), "smart")
	if err != nil || m.OwnedBy != "modelgate" {
		t.Errorf("get smart: %+v, %v", m, err)
	}
}

// TestIntegrationLogs runs traffic of every kind with Caddy logging at
// DEBUG, then checks the logs: the placeholders name the key, provider and
// model, and no secret appears anywhere.
func TestIntegrationLogs(t *testing.T) {
	g := startGateway(t)
	client := sdk(aliceKey)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, model := range []string{"oa/gpt-4o-mini", "claude/claude-sonnet-4-5", "after-dial-error", "all-fail"} {
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = client.Chat.Completions.New(ctx, userChat(model, "log me")) }()
		go func() {
			defer wg.Done()
			s := client.Chat.Completions.NewStreaming(ctx, userChat(model, "log me"))
			for s.Next() {
			}
		}()
	}
	wg.Wait()
	unknown, bob := sdk("mg-unknown-key-123"), sdk(bobKey)
	_, _ = unknown.Chat.Completions.New(ctx, userChat("oa/gpt-4o", "hi"))
	_, _ = bob.Chat.Completions.New(ctx, userChat("claude/claude-sonnet-4-5", "hi"))

	// Loading another config closes this one's log files.
	caddytest.NewTester(t).InitServer(`{
		admin localhost:2999
		http_port 9080
	}`, "caddyfile")

	access, err := os.ReadFile(filepath.Join(g.logDir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := os.ReadFile(filepath.Join(g.logDir, "caddy.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(all), "upstream roundtrip") {
		t.Fatal("the debug log lacks reverse_proxy's upstream lines; the check below would prove nothing")
	}
	logs := string(all) + string(access)
	for _, secret := range []string{aliceKey, bobKey, openAIKey, anthropicKey, "mg-unknown-key-123"} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds the secret %q", secret)
		}
	}

	found := false
	for _, line := range strings.Split(string(access), "\n") {
		if gjson.Get(line, "mg_model").Str == "claude-sonnet-4-5" && gjson.Get(line, "mg_key").Str == "bob" {
			found = true
			if gjson.Get(line, "user_id").Str != "bob" || gjson.Get(line, "mg_provider").Str != "claude" {
				t.Errorf("access log line %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no access log line names key bob and model claude-sonnet-4-5:\n%s", access)
	}

	// Every answered request's entry says who, where, what it used and
	// cost, and which targets were tried — never a prompt or an answer.
	var fallback, priced bool
	for _, line := range strings.Split(string(access), "\n") {
		if !gjson.Get(line, "modelgate_provider").Exists() {
			continue
		}
		if strings.Contains(line, "log me") || strings.Contains(line, "echo:") {
			t.Errorf("an access log line holds a prompt or an answer: %s", line)
		}
		if gjson.Get(line, "modelgate_key").Str == "" || gjson.Get(line, "modelgate_owner").Str == "" ||
			!gjson.Get(line, "modelgate_tokens_in").Exists() || !gjson.Get(line, "modelgate_tokens_out").Exists() ||
			gjson.Get(line, "modelgate_cost").Str == "" {
			t.Errorf("access log line lacks a modelgate field: %s", line)
		}
		if len(gjson.Get(line, "modelgate_fallback").Array()) == 2 {
			fallback = true // after-dial-error: down/gpt-4o, then claude
		}
		if c := gjson.Get(line, "modelgate_cost").Str; c != "unpriced" && c != "0" {
			priced = true
		}
	}
	if !fallback || !priced {
		t.Errorf("no entry shows a fallback path (%v) or a priced request (%v):\n%s", fallback, priced, access)
	}
}
