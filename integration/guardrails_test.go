package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

const guardrailsCaddyfile = "../testdata/caddyfiles/guardrails.Caddyfile"

// screenToken is the screening service's token, in the webhook guards'
// URL and header: it must reach no client and no log.
const screenToken = "scr-tok-5f1e9a77c0"

// screeningService is a screening service on loopback, as the webhook
// protocol has it: it blocks texts that say "forbidden", masks "Alice"
// and fails (500) on "down".
func screeningService(t *testing.T) *atomic.Int32 {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+screenToken || r.URL.Query().Get("token") != screenToken {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		var in struct {
			Guard, Direction, API, Model, Key, Account string
			Texts                                      []string
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Direction != "request" || in.Key == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		joined := strings.Join(in.Texts, " ")
		switch {
		case strings.Contains(joined, "down"):
			http.Error(w, "down", http.StatusInternalServerError)
		case strings.Contains(joined, "forbidden"):
			_ = json.NewEncoder(w).Encode(map[string]any{"action": "block", "reason": "forbidden topic for " + in.Model})
		case strings.Contains(joined, "Alice"):
			out := make([]string, len(in.Texts))
			for i, s := range in.Texts {
				out[i] = strings.ReplaceAll(s, "Alice", "[NAME]")
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"action": "mask", "texts": out})
		default:
			_, _ = io.WriteString(w, `{"action":"allow"}`)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("MG_SCREEN", srv.URL)
	return &calls
}

// startGuardrailsGateway loads guardrails.Caddyfile in front of a fake
// provider and a screening service, with the content_blocked events
// recorded.
func startGuardrailsGateway(t *testing.T) *gateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	g := &gateway{fake: fake, logDir: t.TempDir()}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	t.Setenv("MG_SCREEN_TOKEN", screenToken)
	cfg, err := os.ReadFile(guardrailsCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	adapted, err = sjson.SetRawBytes(adapted, "apps.events", []byte(`{"subscriptions":[{"events":["content_blocked"],"handlers":[{"handler":"modelgate_test_recorder"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	recorded.mu.Lock()
	recorded.events = nil
	recorded.mu.Unlock()
	caddytest.NewTester(t).InitServer(string(adapted), "json")
	return g
}

// sentSince is what the fake was sent after the first n requests, joined.
func sentSince(fake *providertest.Server, n int) string {
	var b strings.Builder
	for _, r := range fake.Requests()[n:] {
		b.Write(r.Body)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestIntegrationGuardrails runs the guards of docs/guardrails.md through
// a real Caddyfile: requests masked before the provider sees them (chat,
// Responses and Messages passed through natively, count_tokens,
// embeddings, batch lines), blocked in each API's shape, screened by a
// webhook (masked, blocked, 503 when it cannot decide, fail-open),
// moderated by the provider's moderation endpoint with the provider's key;
// streamed answers masked and blocked as they flow; the metrics, the
// content_blocked event and the log.
func TestIntegrationGuardrails(t *testing.T) {
	screenCalls := screeningService(t)
	g := startGuardrailsGateway(t)
	before := scrapeMetrics(t)
	const pii = "write to bob@example.com, card 4111 1111 1111 1111"
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }

	t.Run("requests masked", func(t *testing.T) {
		for _, tc := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":` + q(pii) + `}]}`},
			{"chat tool call and result", "/v1/chat/completions", `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"look"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"find","arguments":` + q(`{"q":`+q(pii)+`}`) + `}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":` + q(pii) + `}]}`},
			{"responses native", "/v1/responses", `{"model":"oa/gpt-4o-mini","store":false,"input":` + q(pii) + `}`},
			{"messages native", "/v1/messages", `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":` + q(pii) + `}]}`},
			{"count_tokens", "/v1/messages/count_tokens", `{"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":` + q(pii) + `}]}`},
			{"embeddings", "/v1/embeddings", `{"model":"oa/text-embedding-3-small","input":[` + q(pii) + `]}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n := len(g.fake.Requests())
				status, body, _ := request(t, "POST", gatewayBase+tc.path, tc.body, "Authorization", "Bearer "+aliceKey, "anthropic-version", "2023-06-01")
				sent := sentSince(g.fake, n)
				if status != 200 {
					t.Fatalf("%d %s", status, body)
				}
				if strings.Contains(sent, "bob@example.com") || strings.Contains(sent, "4111 1111") ||
					!strings.Contains(sent, "[EMAIL]") || !strings.Contains(sent, "[CREDIT_CARD]") {
					t.Errorf("the provider was sent %s", sent)
				}
			})
		}
	})

	t.Run("requests blocked", func(t *testing.T) {
		n := len(g.fake.Requests())
		for _, tc := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"about Project Falcon"}]}`},
			{"responses", "/v1/responses", `{"model":"oa/gpt-4o-mini","input":"about project falcon"}`},
			{"messages", "/v1/messages", `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"about Project Falcon"}]}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body, _ := request(t, "POST", gatewayBase+tc.path, tc.body, "Authorization", "Bearer "+aliceKey)
				if status != 400 || !strings.Contains(gjson.Get(body, "error.message").Str, `guard "banned"`) {
					t.Fatalf("%d %s", status, body)
				}
				if tc.name == "messages" {
					if gjson.Get(body, "type").Str != "error" || gjson.Get(body, "error.type").Str != "invalid_request_error" {
						t.Errorf("not Anthropic's shape: %s", body)
					}
				} else if gjson.Get(body, "error.code").Str != "content_blocked" || gjson.Get(body, "error.type").Str != "invalid_request_error" {
					t.Errorf("not OpenAI's shape: %s", body)
				}
			})
		}
		if sent := sentSince(g.fake, n); sent != "" {
			t.Errorf("the provider was sent %s", sent)
		}
	})

	t.Run("webhook", func(t *testing.T) {
		chat := func(model, text string) (int, string) {
			status, body, _ := request(t, "POST", gatewayBase+"/v1/chat/completions",
				`{"model":"`+model+`","messages":[{"role":"user","content":`+q(text)+`}]}`, "Authorization", "Bearer "+aliceKey)
			return status, body
		}
		n := len(g.fake.Requests())
		if status, body := chat("screened", "ask Alice"); status != 200 || !strings.Contains(sentSince(g.fake, n), "ask [NAME]") {
			t.Errorf("masked: %d %s; sent %s", status, body, sentSince(g.fake, n))
		}
		if status, body := chat("screened", "a forbidden thing"); status != 400 || gjson.Get(body, "error.code").Str != "content_blocked" ||
			!strings.Contains(body, `guard \"screen\": forbidden topic for screened`) {
			t.Errorf("blocked: %d %s", status, body)
		}
		status, body := chat("oa/gpt-screened", "the service is down")
		if status != 503 || gjson.Get(body, "error.code").Str != "guard_unavailable" || strings.Contains(body, screenToken) || strings.Contains(body, "127.0.0.1") {
			t.Errorf("undecided, closed: %d %s", status, body)
		}
		if status, body := chat("oa/gpt-open", "the service is down"); status != 200 {
			t.Errorf("undecided, open: %d %s", status, body)
		}
		if status, _ := chat("oa/gpt-4o-mini", "forbidden, but not screened"); status != 200 {
			t.Errorf("a model the webhook does not screen: %d", status)
		}
		if screenCalls.Load() != 4 {
			t.Errorf("the service was called %d times, want 4", screenCalls.Load())
		}
	})

	t.Run("moderation", func(t *testing.T) {
		n := len(g.fake.Requests())
		status, body, _ := request(t, "POST", gatewayBase+"/v1/messages",
			`{"model":"claude/claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"I will attack the castle"}]}`,
			"Authorization", "Bearer "+bobKey)
		if status != 400 || !strings.Contains(body, `guard \"moderation\"`) || !strings.Contains(body, "violence") {
			t.Errorf("%d %s", status, body)
		}
		reqs := g.fake.Requests()[n:]
		if len(reqs) != 1 || reqs[0].Path != "/v1/moderations" || reqs[0].Header.Get("Authorization") != "Bearer "+openAIKey {
			t.Errorf("the fake was sent %+v", reqs)
		}
	})

	t.Run("streams", func(t *testing.T) {
		for _, tc := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"oa/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":%s}]}`},
			{"chat translated", "/v1/chat/completions", `{"model":"claude/claude-sonnet-4-5","stream":true,"max_tokens":50,"messages":[{"role":"user","content":%s}]}`},
			{"responses native", "/v1/responses", `{"model":"oa/gpt-4o-mini","stream":true,"store":false,"input":%s}`},
			{"messages native", "/v1/messages", `{"model":"claude/claude-sonnet-4-5","stream":true,"max_tokens":50,"messages":[{"role":"user","content":%s}]}`},
			{"messages translated", "/v1/messages", `{"model":"oa/gpt-4o-mini","stream":true,"max_tokens":50,"messages":[{"role":"user","content":%s}]}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n := len(g.fake.Requests())
				status, body, h := request(t, "POST", gatewayBase+tc.path, fmt.Sprintf(tc.body, q(pii)), "Authorization", "Bearer "+bobKey)
				if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("%d %s", status, body)
				}
				if !strings.Contains(sentSince(g.fake, n), "bob@example.com") {
					t.Error("bob's request was masked")
				}
				if strings.Contains(body, "bob@example") || strings.Contains(body, "4111 1111") || !strings.Contains(body, "[EMAIL]") {
					t.Errorf("the stream: %s", body)
				}
				status, body, _ = request(t, "POST", gatewayBase+tc.path, fmt.Sprintf(tc.body, q("say TOP-SECRET-42 twice")), "Authorization", "Bearer "+bobKey)
				if status != 200 || strings.Contains(body, "TOP-SECRET") || !strings.Contains(body, `guard \"leak\"`) {
					t.Errorf("blocked stream: %d %s", status, body)
				}
			})
		}
	})

	t.Run("batch", func(t *testing.T) {
		c := sdk(aliceKey)
		n := len(g.fake.Requests())
		in := uploadLines(t, c, []string{
			`{"custom_id":"blocked","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"Project Falcon"}]}}`,
			`{"custom_id":"masked","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":` + q(pii) + `}]}}`,
		})
		b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
		b = waitBatch(t, c, b.ID, 20*time.Second, "completed", "failed")
		errs := fileLines(t, c, b.ErrorFileID)
		if e := errs["blocked"]; e.Get("response.status_code").Int() != 400 || e.Get("response.body.error.code").Str != "content_blocked" {
			t.Errorf("error file: %v", errs)
		}
		if out := fileLines(t, c, b.OutputFileID); out["masked"].Get("response.status_code").Int() != 200 {
			t.Errorf("output file: %v", out)
		}
		if sent := sentSince(g.fake, n); strings.Contains(sent, "bob@example.com") || !strings.Contains(sent, "[EMAIL]") || strings.Contains(sent, "Falcon") {
			t.Errorf("the provider was sent %s", sent)
		}
	})

	t.Run("metrics, events and logs", func(t *testing.T) {
		waitMetrics(t, before, []metricDelta{
			{`caddy_modelgate_guard_decisions_total{action="block",guard="banned"}`, 4},
			{`caddy_modelgate_guard_decisions_total{action="mask",guard="screen"}`, 1},
			{`caddy_modelgate_guard_decisions_total{action="error",guard="screen"}`, 1},
			{`caddy_modelgate_guard_decisions_total{action="error",guard="screen-open"}`, 1},
			{`caddy_modelgate_guard_decisions_total{action="block",guard="moderation"}`, 1},
			{`caddy_modelgate_guard_decisions_total{action="block",guard="leak"}`, 5},
		})
		recorded.mu.Lock()
		var blocked []string
		for _, e := range recorded.events {
			if e.Name() == "content_blocked" && e.Origin().CaddyModule().ID == "modelgate" {
				d := e.Data
				blocked = append(blocked, fmt.Sprint(d["guard"], "/", d["direction"], "/", d["key"]))
			}
		}
		recorded.mu.Unlock()
		for _, want := range []string{"banned/request/alice", "screen/request/alice", "moderation/request/bob", "leak/response/bob"} {
			if !strings.Contains(strings.Join(blocked, " "), want) {
				t.Errorf("no content_blocked event %s in %v", want, blocked)
			}
		}
		log, err := os.ReadFile(filepath.Join(g.logDir, "caddy.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "a guard could not decide") || strings.Contains(string(log), screenToken) {
			t.Errorf("the log has no warning of the undecided guard, or has the service's token")
		}
	})
}

// TestGuardrailsModerationProviderChecked: a moderation guard's provider
// must be a configured provider with a moderation endpoint (type openai):
// anything else fails the config's load, naming the guard.
func TestGuardrailsModerationProviderChecked(t *testing.T) {
	for _, tc := range []struct{ provider, want string }{
		{"claude", `provider "claude" is of type anthropic, which has no moderation endpoint`},
		{"nobody", `provider "nobody" is not a configured provider`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			cfg := `{
	admin off
	modelgate {
		provider oa openai {
			base_url http://127.0.0.1:1/v1
			api_key sk-test
		}
		provider claude anthropic {
			base_url http://127.0.0.1:1
			api_key sk-ant-test
		}
		storage file_system ` + storageDir(t) + `
		guardrails {
			guard moderation {
				type moderation
				provider ` + tc.provider + `
			}
		}
	}
}
`
			adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
			if err != nil {
				t.Fatal(err)
			}
			var c caddy.Config
			if err := json.Unmarshal(adapted, &c); err != nil {
				t.Fatal(err)
			}
			err = caddy.Validate(&c)
			if err == nil || !strings.Contains(err.Error(), "guard moderation: "+tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
