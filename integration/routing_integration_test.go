package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/routing"
)

// The routing engine in the request path, through caddytest with real
// Caddyfiles: each test puts chaos fakes (providertest.StartChaos) in front
// of a gateway as its providers' base_url, makes them fail the ways real
// providers fail, and reads what the gateway did from the fakes' counts,
// GET /modelgate/health and the metrics.

// routingGateway loads a gateway whose providers are p (the primary, at
// primary's URL) and s (the secondary), both OpenAI's API, with the
// routing options routing and the alias "smart" of p/gpt-4o-mini and
// s/gpt-4o with the block alias (may be empty). extra is added to the
// modelgate block (more providers and aliases).
func routingGateway(t *testing.T, primary, secondary string, routingOpts, alias, extra string) {
	t.Helper()
	routingGatewayOn(t, storageDir(t), primary, secondary, routingOpts, alias, extra)
}

// routingGatewayOn is routingGateway on the storage directory storage:
// a config loaded again on the same storage keeps its targets' health.
func routingGatewayOn(t *testing.T, storage, primary, secondary string, routingOpts, alias, extra string) {
	t.Helper()
	cfg := fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	log {
		output file %s/caddy.log
		level DEBUG
	}
	modelgate {
		storage file_system %s
		provider p openai {
			base_url %s/v1
			api_key %s
		}
		provider s openai {
			base_url %s/v1
			api_key %s
		}
		key alice %s
		routing {
			%s
		}
		model smart p/gpt-4o-mini s/gpt-4o {
			%s
		}
		%s
	}
}

http://localhost:9080 {
	modelgate_auth
	modelgate
}
`, t.TempDir(), storage, primary, openAIKey, secondary, openAIKey, aliceKey, routingOpts, alias, extra)
	caddytest.NewTester(t).InitServer(cfg, "caddyfile")
}

// chatSmart sends one chat request to model (streamed when stream) and
// returns its status and body.
func chatSmart(t *testing.T, model string, stream bool) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%v}`, model, stream)
	res := post(t, "/v1/chat/completions", aliceKey, body)
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// routingHealth reads GET /modelgate/health on the admin endpoint.
func routingHealth(t *testing.T, admin string) routing.Health {
	t.Helper()
	res, err := http.Get(admin + "/modelgate/health")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("health: %d %s", res.StatusCode, b)
	}
	var h routing.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("health: %v: %s", err, b)
	}
	return h
}

// targetHealth is target key's entry in h.
func targetHealth(t *testing.T, h routing.Health, key string) routing.TargetHealth {
	t.Helper()
	for _, th := range h.Targets {
		if th.Target == key {
			return th
		}
	}
	t.Fatalf("no target %s in %+v", key, h)
	return routing.TargetHealth{}
}

// answeredBy reports whether a chat answer (or stream) came from the
// model: the fakes name it in every answer and chunk.
func answeredBy(body, model string) bool { return strings.Contains(body, `"model":"`+model+`"`) }

func TestIntegrationRoutingDeadPrimary(t *testing.T) {
	primary := providertest.StartChaos(t, providertest.ServerErrors())
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, `breaker {
				consecutive_failures 3
				open_for 2s
			}`, "", "")
	before := scrapeMetrics(t)
	for i := range 10 {
		if code, body := chatSmart(t, "smart", false); code != 200 || !answeredBy(body, "gpt-4o") {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if n := primary.Stats().Requests; n != 3 {
		t.Fatalf("the dead primary was sent %d requests; want 3 (then its breaker is open)", n)
	}
	h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini")
	if h.State != routing.Open || h.Available || h.Opens != 1 || h.OpenUntil.IsZero() || h.ConsecutiveFailures != 3 {
		t.Fatalf("primary's health %+v", h)
	}
	after := scrapeMetrics(t)
	for _, m := range []struct {
		sample string
		want   float64
	}{
		{`caddy_modelgate_breaker_state{model="gpt-4o-mini",provider="p"}`, 2},
		{`caddy_modelgate_breaker_state{model="gpt-4o",provider="s"}`, 0},
	} {
		if v := metricValue(after, m.sample); v != m.want {
			t.Errorf("%s = %v, want %v\n%s", m.sample, v, m.want, after)
		}
	}
	opens := `caddy_modelgate_breaker_opens_total{model="gpt-4o-mini",provider="p"}`
	if d := metricValue(after, opens) - metricValue(before, opens); d != 1 {
		t.Errorf("%s grew by %v\n%s", opens, d, after)
	}
	if !strings.Contains(after, `caddy_modelgate_retry_budget_exhausted_total{alias="smart"}`) ||
		!strings.Contains(after, `caddy_modelgate_cooldowns_total{model="gpt-4o-mini",provider="p"}`) {
		t.Errorf("metrics lack the retry budget or cool-downs:\n%s", after)
	}

	// After open_for, one trial goes to the primary, now healthy: it
	// closes.
	primary.Set(providertest.Healthy())
	time.Sleep(2100 * time.Millisecond)
	if code, body := chatSmart(t, "smart", false); code != 200 || !answeredBy(body, "gpt-4o-mini") {
		t.Fatalf("trial: %d %s", code, body)
	}
	if n := primary.Stats().Requests; n != 4 {
		t.Fatalf("primary sent %d requests; want the trial", n)
	}
	if h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini"); h.State != routing.Closed {
		t.Fatalf("after the trial: %+v", h)
	}
}

func TestIntegrationRoutingBlackHole(t *testing.T) {
	// A primary that never answers: each stream falls over after
	// first_token_timeout, until its breaker opens; then it is skipped
	// and costs nothing.
	primary := providertest.StartChaos(t, providertest.BlackHole())
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, `breaker {
				consecutive_failures 2
				open_for 1m
			}`, "target p/gpt-4o-mini first_token_timeout 300ms", "")
	var slow int
	for i := range 6 {
		start := time.Now()
		code, body := chatSmart(t, "smart", true)
		if code != 200 || !answeredBy(body, "gpt-4o") || answeredBy(body, "gpt-4o-mini") || !strings.Contains(body, "[DONE]") {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		if time.Since(start) >= 300*time.Millisecond {
			slow++
		}
	}
	if held := primary.Stats().Held; held != 2 || slow != 2 {
		t.Fatalf("the black hole took %d requests, %d requests waited for it; want 2 and 2", held, slow)
	}
}

func TestIntegrationRoutingCooldowns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		form  providertest.RetryForm
		model string // the primary's: an anthropic provider's speaks Anthropic's headers
	}{
		{"retry-after", providertest.RetryAfterSeconds, "p/gpt-4o-mini"},
		{"retry-after-ms", providertest.RetryAfterMs, "p/gpt-4o-mini"},
		{"openai resets", providertest.OpenAIResets, "p/gpt-4o-mini"},
		{"anthropic resets", providertest.AnthropicResets, "pa/claude-sonnet-4-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := providertest.StartChaos(t, providertest.RateLimited(providertest.RateLimit{RetryAfter: 30 * time.Second, Headers: tc.form}))
			secondary := providertest.StartChaos(t, providertest.Healthy())
			routingGateway(t, primary.URL, secondary.URL, "", "", fmt.Sprintf(`provider pa anthropic {
			base_url %s
			api_key %s
		}
		model claude pa/claude-sonnet-4-5 s/gpt-4o`, primary.URL, anthropicKey))
			alias := "smart"
			if strings.HasPrefix(tc.model, "pa/") {
				alias = "claude"
			}
			before := scrapeMetrics(t)
			for i := range 5 {
				if code, body := chatSmart(t, alias, false); code != 200 || !answeredBy(body, "gpt-4o") {
					t.Fatalf("request %d: %d %s", i, code, body)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if n := primary.Stats().Requests; n != 1 {
				t.Fatalf("the rate-limited primary was sent %d requests; want 1 in its 30s", n)
			}
			h := targetHealth(t, routingHealth(t, "http://localhost:2999"), tc.model)
			if until := time.Until(h.CooldownUntil); until < 25*time.Second || until > 31*time.Second || h.Available {
				t.Fatalf("cool-down until %v (in %v): %+v", h.CooldownUntil, until, h)
			}
			p, m, _ := strings.Cut(tc.model, "/")
			sample := fmt.Sprintf(`caddy_modelgate_cooldowns_total{model=%q,provider=%q}`, m, p)
			waitMetrics(t, before, []metricDelta{{sample, 1}})
			// Named itself, the target is cooling down too: 503 with when.
			code, body := chatSmart(t, tc.model, false)
			if code != 503 || !strings.Contains(body, `"code":"targets_unavailable"`) {
				t.Fatalf("%s: %d %s", tc.model, code, body)
			}
		})
	}
}

func TestIntegrationRoutingResetMidStream(t *testing.T) {
	primary := providertest.StartChaos(t, providertest.ResetMidStream())
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, "", "", "")
	code, body := chatSmart(t, "smart", true)
	if code != 200 || !answeredBy(body, "gpt-4o-mini") || !strings.Contains(body, `"error"`) || strings.Contains(body, "[DONE]") ||
		secondary.Stats().Requests != 0 {
		t.Fatalf("%d %s (secondary sent %d)", code, body, secondary.Stats().Requests)
	}
	h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini")
	if h.Failures != 1 || h.ConsecutiveFailures != 1 {
		t.Fatalf("the reset was not counted: %+v", h)
	}
}

func TestIntegrationRoutingSlowFirstToken(t *testing.T) {
	primary := providertest.StartChaos(t, providertest.SlowFirstToken(2*time.Second))
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, "first_token_timeout 500ms", "", "")
	start := time.Now()
	code, body := chatSmart(t, "smart", true)
	if took := time.Since(start); code != 200 || !answeredBy(body, "gpt-4o") || answeredBy(body, "gpt-4o-mini") ||
		!strings.Contains(body, "[DONE]") || took > 1500*time.Millisecond {
		t.Fatalf("%d in %v: %s", code, took, body)
	}
	if h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini"); h.Failures != 1 || h.FirstTokenTimeoutMS != 500 {
		t.Fatalf("primary's health %+v", h)
	}
}

func TestIntegrationRoutingLatency(t *testing.T) {
	primary := providertest.StartChaos(t, providertest.Slow(300*time.Millisecond))
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, "", "policy latency", "")
	for i := range 20 {
		if code, body := chatSmart(t, "smart", false); code != 200 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if p, s := primary.Stats().Requests, secondary.Stats().Requests; p > 2 || s < 18 {
		t.Fatalf("slow primary %d, fast secondary %d: the fast one did not serve (almost) all", p, s)
	}
}

func TestIntegrationRoutingFlapping(t *testing.T) {
	// Healthy for a second, failing for a second, and so on: the breaker
	// opens in the failing phase and closes in the healthy one after it,
	// and every client gets an answer throughout.
	primary := providertest.StartChaos(t, providertest.Flapping(time.Second, time.Second, providertest.ServerErrors()))
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, secondary.URL, `breaker {
				consecutive_failures 2
				open_for 400ms
			}`, "", "")
	var sawOpen, closedAfter bool
	for end := time.Now().Add(3200 * time.Millisecond); time.Now().Before(end); {
		if code, body := chatSmart(t, "smart", false); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		switch h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini"); {
		case h.State == routing.Open:
			sawOpen = true
		case sawOpen && h.State == routing.Closed:
			closedAfter = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawOpen || !closedAfter {
		t.Fatalf("open %v, closed after %v", sawOpen, closedAfter)
	}
}

func TestIntegrationRoutingHealthMethod(t *testing.T) {
	primary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, primary.URL, primary.URL, "", "", "")
	code, body, h := request(t, http.MethodPost, "http://localhost:2999/modelgate/health", "")
	if code != 405 || h.Get("Allow") != "GET" || !strings.Contains(body, "method not allowed") {
		t.Fatalf("%d %s %v", code, body, h)
	}
	hl := routingHealth(t, "http://localhost:2999")
	if len(hl.Targets) != 2 || len(hl.Aliases) != 1 || hl.Aliases[0].Alias != "smart" || hl.Aliases[0].Policy != routing.Ordered {
		t.Fatalf("%+v", hl)
	}
}

func TestIntegrationRoutingIdleTimeout(t *testing.T) {
	// A provider that sends its stream's first event and then nothing:
	// after idle_timeout the client gets the API's error event and the
	// end of its stream, and the provider's connection is given up.
	gaveUp := make(chan struct{}, 1)
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"the start"},"finish_reason":null}]}`+"\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			gaveUp <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(stall.Close)
	secondary := providertest.StartChaos(t, providertest.Healthy())
	routingGateway(t, stall.URL, secondary.URL, "idle_timeout 300ms", "", "")
	start := time.Now()
	code, body := chatSmart(t, "smart", true)
	if took := time.Since(start); code != 200 || !strings.Contains(body, "the start") || !strings.Contains(body, `"code":"upstream_stalled"`) ||
		took > 5*time.Second || secondary.Stats().Requests != 0 {
		t.Fatalf("%d in %v: %s", code, took, body)
	}
	select {
	case <-gaveUp:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled provider's request was not given up")
	}
	if h := targetHealth(t, routingHealth(t, "http://localhost:2999"), "p/gpt-4o-mini"); h.Failures != 1 || h.IdleTimeoutMS != 300 {
		t.Fatalf("the stall was not counted: %+v", h)
	}
}

func TestIntegrationRoutingReload(t *testing.T) {
	// A config reloaded on the same storage keeps its targets' health: an
	// open breaker stays open, and the metrics' totals keep counting.
	primary := providertest.StartChaos(t, providertest.ServerErrors())
	secondary := providertest.StartChaos(t, providertest.Healthy())
	storage := storageDir(t)
	breaker := `breaker {
				consecutive_failures 2
				open_for 1m
			}`
	routingGatewayOn(t, storage, primary.URL, secondary.URL, breaker, "", "")
	for range 3 {
		chatSmart(t, "smart", false)
	}
	routingGatewayOn(t, storage, primary.URL, secondary.URL, breaker, "policy weighted", "")
	for i := range 5 {
		if code, body := chatSmart(t, "smart", false); code != 200 || !answeredBy(body, "gpt-4o") {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if n := primary.Stats().Requests; n != 2 {
		t.Fatalf("the dead primary was sent %d requests across the reload; want 2", n)
	}
	h := routingHealth(t, "http://localhost:2999")
	if th := targetHealth(t, h, "p/gpt-4o-mini"); th.State != routing.Open || th.Opens != 1 || th.Requests != 2 {
		t.Fatalf("after the reload: %+v", th)
	}
	if h.Aliases[0].Policy != routing.Weighted {
		t.Fatalf("the reloaded config's policy is not in force: %+v", h.Aliases[0])
	}
	if v := metricValue(scrapeMetrics(t), `caddy_modelgate_breaker_state{model="gpt-4o-mini",provider="p"}`); v != 2 {
		t.Fatalf("breaker_state %v after the reload", v)
	}
}
