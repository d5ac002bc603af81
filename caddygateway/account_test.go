package caddygateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/pricing"
)

// TestSettleReports checks what a settled call tells the access log and
// the placeholders, for a priced stream that fell back once and for an
// unpriced answer to a batch line (no key).
func TestSettleReports(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	oa := &gateway.Provider{Name: "oa", Type: "openai"}
	down := &gateway.Provider{Name: "down", Type: "openai"}
	start := time.Now()
	settled := func(key *Key, o *gateway.Outcome) *gateway.Outcome {
		o.Key, o.Settled, o.Target = key, true, o.Tried[len(o.Tried)-1]
		o.Cost, o.Priced = prices.Cost(o.Target.Provider.Type, o.Target.Model, pricing.Usage{PromptTokens: o.Usage.Prompt,
			CachedTokens: o.Usage.Cached, CompletionTokens: o.Usage.Completion})
		return o
	}

	for _, tc := range []struct {
		name      string
		key       *Key
		m         *gateway.Outcome
		log       string
		wantPlace map[string]string // placeholders; "" must be unset
	}{{
		name: "priced stream after a fallback",
		key:  &Key{Name: "alice-key", Owner: "alice"},
		m: &gateway.Outcome{Start: start, FirstByte: start.Add(42 * time.Millisecond), Streamed: true,
			Tried: []gateway.Target{{Provider: down, Model: "gpt-4o"}, {Provider: oa, Model: "gpt-4o-mini"}},
			Usage: gateway.Usage{Prompt: 1200, Cached: 200, Completion: 300, Known: true}},
		log: `{"msg":"handled request","modelgate_provider":"oa","modelgate_model":"gpt-4o-mini","modelgate_tokens_in":1200,` +
			`"modelgate_tokens_out":300,"modelgate_tokens_cached":200,"modelgate_fallback":["down/gpt-4o","oa/gpt-4o-mini"],` +
			`"modelgate_cost":"0.000345","modelgate_key":"alice-key","modelgate_owner":"alice","modelgate_ttft_ms":42}`,
		wantPlace: map[string]string{"http.modelgate.provider": "oa", "http.modelgate.model": "gpt-4o-mini", "http.modelgate.tokens_in": "1200", "http.modelgate.tokens_out": "300",
			"http.modelgate.tokens_cached": "200", "http.modelgate.cost": "0.000345",
			"http.modelgate.fallback": "down/gpt-4o > oa/gpt-4o-mini", "http.modelgate.ttft_ms": "42"},
	}, {
		name: "unpriced, no key",
		m: &gateway.Outcome{Start: start, Tried: []gateway.Target{{Provider: oa, Model: "no-such-model"}},
			Usage: gateway.Usage{Prompt: 7, Completion: 3, Known: true}},
		log: `{"msg":"handled request","modelgate_provider":"oa","modelgate_model":"no-such-model","modelgate_tokens_in":7,` +
			`"modelgate_tokens_out":3,"modelgate_tokens_cached":0,"modelgate_fallback":["oa/no-such-model"],"modelgate_cost":"unpriced"}`,
		wantPlace: map[string]string{"http.modelgate.provider": "oa", "http.modelgate.model": "no-such-model", "http.modelgate.tokens_in": "7", "http.modelgate.tokens_out": "3",
			"http.modelgate.tokens_cached": "0", "http.modelgate.cost": "unpriced",
			"http.modelgate.fallback": "oa/no-such-model", "http.modelgate.ttft_ms": ""},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			repl := caddy.NewReplacer()
			extra := new(caddyhttp.ExtraLogFields)
			ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, repl)
			ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, extra)
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
			repl.Map((*outcome)(tc.m).placeholder) // as serveCall does
			if v, ok := repl.GetString("http.modelgate.tokens_in"); ok {
				t.Errorf("{http.modelgate.tokens_in} = %q before the request is settled", v)
			}
			settled(tc.key, tc.m)
			logSettled(r, tc.m)

			// The access log entry, as Caddy's server writes it: the
			// extra fields after its own. (ExtraLogFields keeps them
			// unexported; TestIntegrationLogs reads a real access log.)
			var out bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg"}), zapcore.AddSync(&out), zapcore.InfoLevel)
			zap.New(core).Info("handled request", zap.Field{Key: "modelgate", Type: zapcore.InlineMarshalerType, Interface: (*accessLogFields)(tc.m)})
			if got := string(bytes.TrimSpace(out.Bytes())); got != tc.log {
				t.Errorf("access log entry\n got %s\nwant %s", got, tc.log)
			}
			for k, want := range tc.wantPlace {
				got, ok := repl.GetString(k)
				if want == "" {
					if ok {
						t.Errorf("{%s} = %q, want unset", k, got)
					}
					continue
				}
				if got != want {
					t.Errorf("{%s} = %q (set %v), want %q", k, got, ok, want)
				}
			}
		})
	}
}

// TestSettleAccessLogFields checks that a settled call's fields go into
// the access log entry of a request a server may log, and skips
// them where the server keeps no access log (they would cost every
// request an allocation or two for nothing). TestIntegrationLogs reads
// them in a real access log.
func TestSettleAccessLogFields(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	oa := &gateway.Provider{Name: "oa", Type: "openai"}
	for _, tc := range []struct {
		name   string
		server *caddyhttp.Server // nil: none in the context
		want   bool
	}{
		{"server with access logs", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}, true},
		{"server without access logs", &caddyhttp.Server{}, false},
		{"no server in the context", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := new(caddyhttp.ExtraLogFields)
			ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer())
			ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, extra)
			if tc.server != nil {
				ctx = context.WithValue(ctx, caddyhttp.ServerCtxKey, tc.server)
			}
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
			t0 := gateway.Target{Provider: oa, Model: "gpt-4o-mini"}
			m := &gateway.Outcome{Start: time.Now(), Target: t0, Tried: []gateway.Target{t0}, Key: &Key{Name: "k"}, Settled: true,
				Usage: gateway.Usage{Prompt: 10, Completion: 5, Known: true}}
			m.Cost, m.Priced = prices.Cost("openai", "gpt-4o-mini", pricing.Usage{PromptTokens: 10, CompletionTokens: 5})
			logSettled(r, m)
			// ExtraLogFields keeps its fields unexported.
			fields := reflect.ValueOf(extra).Elem().FieldByName("fields")
			if fields.Kind() != reflect.Slice {
				t.Fatalf("caddyhttp.ExtraLogFields has no fields slice any more: %v", fields.Kind())
			}
			if got := fields.Len() == 1; got != tc.want {
				t.Errorf("access log fields set: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRequestPlaceholders sends requests through the gateway and reads the
// placeholders a later handler (or the access log's log_append) sees.
func TestRequestPlaceholders(t *testing.T) {
	g := newBenchGateway(t)
	for _, tc := range []struct {
		name string
		body []byte
		want map[string]string // "": unset; "*": set to anything
	}{
		{"answered", benchChatBody("oa/gpt-4o-mini", 0, false), map[string]string{
			"http.modelgate.key": "bench", "http.auth.user.id": "bench",
			"http.modelgate.provider": "oa", "http.modelgate.model": "gpt-4o-mini",
			"http.modelgate.tokens_in": "14", "http.modelgate.tokens_out": "10", "http.modelgate.tokens_cached": "0",
			"http.modelgate.cost": "0.0000081", "http.modelgate.fallback": "oa/gpt-4o-mini", "http.modelgate.ttft_ms": ""}},
		{"streamed", benchChatBody("claude/claude-sonnet-4-5", 0, true), map[string]string{
			"http.modelgate.provider": "claude", "http.modelgate.model": "claude-sonnet-4-5",
			"http.modelgate.fallback": "claude/claude-sonnet-4-5", "http.modelgate.ttft_ms": "*"}},
		{"refused by the provider's translator", []byte(`{"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"n":3}`), map[string]string{
			"http.modelgate.provider": "claude", "http.modelgate.model": "claude-sonnet-4-5",
			"http.modelgate.tokens_in": "", "http.modelgate.cost": "", "http.modelgate.fallback": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &sink{header: make(http.Header), keep: true}
			r := g.request(w, "/v1/chat/completions", tc.body, "Authorization", "Bearer "+benchStaticKey)
			if err := g.serveModelgate(w, r); err != nil {
				t.Fatal(err)
			}
			repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			for k, want := range tc.want {
				got, ok := repl.GetString(k)
				switch {
				case want == "" && ok:
					t.Errorf("{%s} = %q, want unset (status %d: %.200s)", k, got, w.status, w.body.Bytes())
				case want == "*" && !ok:
					t.Errorf("{%s} unset (status %d: %.200s)", k, w.status, w.body.Bytes())
				case want != "" && want != "*" && got != want:
					t.Errorf("{%s} = %q (set %v), want %q (status %d: %.200s)", k, got, ok, want, w.status, w.body.Bytes())
				}
			}
		})
	}
}

// TestReplacerEntries holds modelgate to setting nothing in a request's
// replacer map beyond what reverse_proxy sets for the provider's answer
// (about sixteen entries and one per response header, rate-limit headers
// aside, see authTransport.send): its placeholders
// are answered by functions instead. Each entry costs an insert, and two
// more took the map of an OpenAI answer past a growth (2.3 KB per request).
func TestReplacerEntries(t *testing.T) {
	g := newBenchGateway(t)
	// serve sends a chat request and returns its replacer's entries and
	// the replacer.
	serve := func(serve func(http.ResponseWriter, *http.Request) error, model string) (map[string]bool, *caddy.Replacer) {
		t.Helper()
		w := &sink{header: make(http.Header), keep: true}
		r := g.request(w, "/v1/chat/completions", benchChatBody(model, 0, false), "Authorization", "Bearer "+benchStaticKey)
		if err := serve(w, r); err != nil || w.status != http.StatusOK {
			t.Fatalf("status %d, error %v: %s", w.status, err, w.body.Bytes())
		}
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if v, _ := repl.GetString("http.reverse_proxy.header.X-Request-Id"); v == "" {
			t.Fatal("reverse_proxy set no placeholder for the answer's X-Request-Id")
		}
		// caddy.Replacer keeps its entries unexported; reading the map's
		// keys through reflection does not touch it.
		m := reflect.ValueOf(repl).Elem().FieldByName("static")
		if !m.IsValid() || m.Kind() != reflect.Map {
			t.Fatal("caddy.Replacer has no map named static any more: this test needs updating")
		}
		keys := map[string]bool{}
		for _, k := range m.MapKeys() {
			keys[k.String()] = true
		}
		return keys, repl
	}
	plain, _ := serve(g.servePlain, "gpt-4o-mini")
	got, repl := serve(g.serveModelgate, "oa/gpt-4o-mini")
	for k := range got {
		if !plain[k] {
			t.Errorf("modelgate set %q in the replacer map, which plain reverse_proxy does not", k)
		}
	}
	// All of plain's but the provider's rate-limit headers, which the
	// gateway's transport takes out of a successful answer.
	for k := range plain {
		if !got[k] && !strings.HasPrefix(k, "http.reverse_proxy.header.X-Ratelimit-") {
			t.Errorf("modelgate's request has no %q in the replacer map", k)
		}
	}
	// The placeholders are still there for whoever reads them.
	if v, _ := repl.GetString("http.auth.user.id"); v != "bench" {
		t.Errorf("{http.auth.user.id} = %q, want bench", v)
	}
}

// TestKeyPlaceholderPrecedence: modelgate_auth answers its placeholders
// from the key, so a value another handler gives one, before or after it,
// wins, and deleting that value brings back the key's (README, Directive
// modelgate_auth).
func TestKeyPlaceholderPrecedence(t *testing.T) {
	g := newBenchGateway(t)
	w := &sink{header: make(http.Header), keep: true}
	r := g.request(w, "/v1/chat/completions", benchChatBody("oa/gpt-4o-mini", 0, false), "Authorization", "Bearer "+benchStaticKey)
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Set("http.auth.user.id", "set-before") // as a handler before modelgate_auth would
	if err := g.serveModelgate(w, r); err != nil || w.status != http.StatusOK {
		t.Fatalf("status %d, error %v", w.status, err)
	}
	if v, _ := repl.GetString("http.auth.user.id"); v != "set-before" {
		t.Errorf("{http.auth.user.id} = %q, want the value set before modelgate_auth", v)
	}
	repl.Set("http.modelgate.key", "set-after")
	if v, _ := repl.GetString("http.modelgate.key"); v != "set-after" {
		t.Errorf("{http.modelgate.key} = %q, want the value set after modelgate_auth", v)
	}
	repl.Delete("http.auth.user.id")
	repl.Delete("http.modelgate.key")
	for k, want := range map[string]string{"http.auth.user.id": "bench", "http.modelgate.key": "bench"} {
		if v, _ := repl.GetString(k); v != want {
			t.Errorf("{%s} = %q after the other value was deleted, want the key's %q", k, v, want)
		}
	}
}
