package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// Secrets of the secrets gateway besides the shared ones (integration_test.go).
const (
	echoKey          = "sk-echo-provider-key-quoted-back-4e1d"
	echoEntraSecret  = "entra-client-secret-of-the-echo-7c2a"
	echoEntraToken   = "entra-access-token-sent-to-the-echo-91f3"
	echoBedrockID    = "AKIDECHOPROVIDER0001"
	echoBedrockKey   = "echo/secret+access/key/for/bedrock/0002"
	echoBedrockToken = "IQoJb3JpZ2luX2VjEEchoSessionToken0002=="
)

// secretsGateway is the gateway of secrets.Caddyfile and what stands
// around it.
type secretsGateway struct {
	*gateway
	backend *recorder // the plain backend behind modelgate_auth
	echo    *recorder // the provider that quotes the credentials it gets
}

// recorder is an HTTP server that keeps the headers of the requests it
// got and answers with serve.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
	serve   http.HandlerFunc
}

func (s *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	s.serve(w, r)
}

func (s *recorder) got() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// startSecretsGateway starts the fake provider, the echo provider, an
// Entra ID token endpoint and a plain backend, and loads
// secrets.Caddyfile in front of them.
func startSecretsGateway(t *testing.T) *secretsGateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	g := &secretsGateway{
		gateway: &gateway{fake: fake, logDir: t.TempDir()},
		backend: &recorder{serve: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "backend") }},
		echo:    &recorder{serve: echoProvider},
	}
	for env, h := range map[string]http.Handler{"MG_BACKEND": g.backend, "MG_ECHO": g.echo, "MG_ENTRA": http.HandlerFunc(echoEntra)} {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		t.Setenv(env, s.URL)
	}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ECHO_KEY", echoKey)
	t.Setenv("MG_ENTRA_SECRET", echoEntraSecret)
	t.Setenv("MG_BEDROCK_KEY_ID", echoBedrockID)
	t.Setenv("MG_BEDROCK_SECRET", echoBedrockKey)
	t.Setenv("MG_BEDROCK_TOKEN", echoBedrockToken)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	cfg, err := os.ReadFile("../testdata/caddyfiles/secrets.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return g
}

// logs returns the access log and Caddy's other log output, once another
// config has closed the files.
func (g *secretsGateway) logs(t *testing.T) (access, other string) {
	t.Helper()
	caddytest.NewTester(t).InitServer(`{
		admin localhost:2999
		http_port 9080
	}`, "caddyfile")
	a, err := os.ReadFile(filepath.Join(g.logDir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := os.ReadFile(filepath.Join(g.logDir, "caddy.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(a), string(o)
}

// managedKey creates a managed key through the admin API.
func managedKey(t *testing.T, name string) string {
	t.Helper()
	status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"`+name+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("creating key %s: %d %s", name, status, body)
	}
	return gjson.Get(body, "key").Str
}

// TestIntegrationClientKeyNotLogged sends a managed key and a static key in
// every header modelgate_auth takes a key from — as x-api-key with the
// Anthropic SDK (streamed and not), as a bearer token with the OpenAI SDK,
// unknown keys of both kinds — through the modelgate handler, a handler that
// fails after modelgate_auth and a plain reverse_proxy after it, on a site
// whose access log has no filter and which reads the key headers'
// placeholders after modelgate_auth (log_append, header). No key reaches
// the access log, Caddy's error log or debug output, a response header set
// from a placeholder, or the backend; the access log shows the header as
// REDACTED.
func TestIntegrationClientKeyNotLogged(t *testing.T) {
	g := startSecretsGateway(t)
	managed := managedKey(t, "laptop")
	const unknownManaged = "mgk_000000000000000000000000000000xxxxxx"
	const unknownStatic = "sk-not-a-gateway-key-at-all-55aa"
	ctx := context.Background()
	secrets := []string{managed, aliceKey, unknownManaged, unknownStatic}

	for _, key := range []string{managed, aliceKey} {
		c := anthropicClient(key)
		p := anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-5", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
		if _, err := c.Messages.New(ctx, p); err != nil {
			t.Fatalf("Messages.New: %v", err)
		}
		s := c.Messages.NewStreaming(ctx, p)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Messages.NewStreaming: %v", err)
		}
		o := sdk(key)
		if _, err := o.Chat.Completions.New(ctx, userChat("oa/gpt-4o-mini", "hi")); err != nil {
			t.Fatalf("Chat.Completions.New: %v", err)
		}
	}
	for _, key := range []string{unknownManaged, unknownStatic} {
		c := anthropicClient(key)
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude/claude-sonnet-4-5", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
			t.Errorf("an unknown key: %v, want 401", err)
		}
	}

	// Every header a key is taken from, on every kind of route.
	headers := func(key string) [][2]string {
		return [][2]string{{"X-Api-Key", key}, {"Authorization", "Bearer " + key}}
	}
	for _, key := range []string{managed, unknownStatic} {
		for _, h := range headers(key) {
			for _, path := range []string{"/v1/models", "/fail", "/proxied/x"} {
				status, body, hdr := request(t, http.MethodGet, gatewayBase+path, "", h[0], h[1])
				want := map[string]int{"/v1/models": 200, "/fail": 500, "/proxied/x": 200}[path]
				if key == unknownStatic {
					want = http.StatusUnauthorized
				}
				if status != want {
					t.Errorf("%s with %s: status %d, want %d: %s", path, h[0], status, want, body)
				}
				for name, v := range hdr {
					if strings.Contains(strings.Join(v, " "), key) {
						t.Errorf("%s with %s: the answer's %s header holds the key", path, h[0], name)
					}
				}
			}
		}
	}

	proxied := g.backend.got()
	if len(proxied) != 2 {
		t.Fatalf("the backend got %d requests, want 2", len(proxied))
	}
	for _, h := range proxied {
		for name, v := range h {
			for _, s := range secrets {
				if strings.Contains(strings.Join(v, " "), s) {
					t.Errorf("the backend got a key in %s", name)
				}
			}
		}
	}

	access, other := g.logs(t)
	for _, s := range secrets {
		if strings.Contains(access, s) {
			t.Errorf("the access log holds the key %q", s)
		}
		for _, line := range strings.Split(other, "\n") {
			if strings.Contains(line, s) {
				t.Errorf("Caddy's log holds the key %q: %s", s, line)
			}
		}
	}
	// The checks above prove something only if the requests were logged
	// with their headers.
	var redacted, failed int
	for _, line := range strings.Split(access, "\n") {
		if gjson.Get(line, "request.headers.X-Api-Key.0").Str == "REDACTED" {
			redacted++
		}
	}
	for _, line := range strings.Split(other, "\n") {
		if strings.HasPrefix(gjson.Get(line, "logger").Str, "http.log.error") && gjson.Get(line, "request.uri").Str == "/fail" {
			failed++
			if v := gjson.Get(line, "request.headers.X-Api-Key.0"); v.Exists() && v.Str != "REDACTED" {
				t.Errorf("error log line %s", line)
			}
		}
	}
	if redacted < 6 || failed == 0 {
		t.Errorf("%d access log lines show X-Api-Key as REDACTED (want 6 or more), %d error log lines the failed request:\n%s", redacted, failed, access)
	}
}

// TestIntegrationGatewayKeyNotForwarded checks that a provider never gets
// the client's key, whichever header carried it: on the Anthropic
// pass-through (/v1/messages, whose anthropic-version and anthropic-beta
// headers do reach the provider), on the Responses pass-through and on
// translated calls. The provider gets its own key, in its own header.
func TestIntegrationGatewayKeyNotForwarded(t *testing.T) {
	g := startSecretsGateway(t)
	managed := managedKey(t, "ci")
	ctx := context.Background()
	c := anthropicClient(managed)
	hi := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	if _, err := c.Beta.Messages.New(ctx, anthropic.BetaMessageNewParams{Model: "claude/claude-sonnet-4-5", MaxTokens: 64,
		Betas:    []anthropic.AnthropicBeta{anthropic.AnthropicBetaInterleavedThinking2025_05_14},
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hi"))}}); err != nil {
		t.Fatalf("Beta.Messages.New: %v", err)
	}
	if _, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "oa/gpt-4o-mini", MaxTokens: 64, Messages: hi}); err != nil {
		t.Fatalf("Messages.New, translated: %v", err)
	}
	o := sdk(managed)
	if _, err := o.Chat.Completions.New(ctx, userChat("claude/claude-sonnet-4-5", "hi")); err != nil {
		t.Fatalf("Chat.Completions.New: %v", err)
	}
	if _, err := o.Responses.New(ctx, responses.ResponseNewParams{Model: "oa/gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	// A client that sends both headers, the key in each.
	if status, body, _ := request(t, http.MethodPost, gatewayBase+"/v1/messages",
		`{"model":"claude/claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+managed, "X-Api-Key", managed, "Anthropic-Version", "2023-06-01"); status != 200 {
		t.Fatalf("both headers: %d %s", status, body)
	}

	var messages, beta int
	for _, r := range g.fake.Requests() {
		for name, v := range r.Header {
			if strings.Contains(strings.Join(v, " "), managed) {
				t.Errorf("%s %s: the provider got the client's key in %s", r.Format, r.Path, name)
			}
		}
		if r.Path != "/v1/messages" {
			continue
		}
		messages++
		if got := r.Header.Values("X-Api-Key"); len(got) != 1 || got[0] != anthropicKey {
			t.Errorf("/v1/messages: x-api-key %q, want the provider's key", got)
		}
		if got := r.Header.Get("Authorization"); got != "" {
			t.Errorf("/v1/messages: Authorization %q, want none", got)
		}
		if r.Header.Get("Anthropic-Beta") == string(anthropic.AnthropicBetaInterleavedThinking2025_05_14) {
			beta++
		}
	}
	if messages < 3 || beta != 1 {
		t.Errorf("the provider got %d Messages requests (want 3 or more), %d with the client's anthropic-beta (want 1)", messages, beta)
	}
}

// failStatus finds the status a request to the echo provider asks for.
var failStatus = regexp.MustCompile(`fail-(\d{3})`)

// echoProvider answers as a provider that quotes every credential it was
// sent in its answers: in its request-id headers always, and in the
// message of an error — of the status the model asks for ("fail-<status>"),
// in the wire format of the request's path — or of an error event in a
// stream that fails midway (model "stream-error"). Any other model gets a
// plain answer.
func echoProvider(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var sent []string
	for _, k := range []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		sent = append(sent, r.Header.Values(k)...)
	}
	quote := "the credentials you sent: " + strings.Join(sent, " | ")
	w.Header().Set("X-Request-Id", "req "+quote)
	w.Header().Set("Request-Id", "req "+quote)
	w.Header().Set("X-Echo", quote)
	msg, _ := json.Marshal(quote)
	what := gjson.GetBytes(body, "model").Str + " " + r.URL.Path
	anthropicPath := r.URL.Path == "/v1/messages"

	if strings.Contains(what, "stream-error") {
		w.Header().Set("Content-Type", "text/event-stream")
		if anthropicPath {
			fmt.Fprintf(w, "event: message_start\ndata: %s\n\n", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}`)
			fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":%s}}\n\n", msg)
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`)
		fmt.Fprintf(w, "data: {\"error\":{\"message\":%s,\"type\":\"server_error\"}}\n\n", msg)
		return
	}
	m := failStatus.FindStringSubmatch(what)
	if m == nil {
		w.Header().Set("Content-Type", "application/json")
		if anthropicPath {
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		return
	}
	status, _ := strconv.Atoi(m[1])
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	switch {
	case anthropicPath:
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%s}}`, msg)
	case strings.HasPrefix(r.URL.Path, "/model/"): // Bedrock
		fmt.Fprintf(w, `{"message":%s}`, msg)
	case strings.Contains(r.URL.Path, ":"): // Gemini
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%s,"status":"INVALID_ARGUMENT"}}`, status, msg)
	default:
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","code":"echo"}}`, msg)
	}
}

// echoEntra is an Entra ID token endpoint: it gives the echo provider's
// client an access token, and refuses any other client with a message
// that quotes the secret it was sent.
func echoEntra(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	if r.Form.Get("client_id") != "test-client" {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "invalid_client", "error_description": "client secret " + r.Form.Get("client_secret") + " is not valid"})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": echoEntraToken, "token_type": "Bearer", "expires_in": 3600})
}

// TestIntegrationProviderSecretsScrubbed sends requests to providers that
// quote every credential they were sent — an api_key as a bearer token,
// x-api-key, api-key and x-goog-api-key, an Entra ID access token, an AWS
// session token — in their error messages (400, 429, 500), in their
// response headers, in a stream's error event, in the Anthropic
// pass-through's errors and stream, and in batch lines' errors. The
// client's bodies, headers and streams, the batch's error file and every
// log (the dispatcher's WARN lines, reverse_proxy's debug lines) show none
// of them.
func TestIntegrationProviderSecretsScrubbed(t *testing.T) {
	g := startSecretsGateway(t)
	secrets := []string{echoKey, echoEntraToken, echoEntraSecret, echoBedrockToken, echoBedrockKey}
	leaks := func(what, s string) {
		t.Helper()
		for _, line := range strings.Split(s, "\n") {
			for _, secret := range secrets {
				if strings.Contains(line, secret) {
					t.Errorf("%s holds the provider secret %q: %s", what, secret, line)
				}
			}
		}
	}
	chat := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	}
	type call struct{ path, body string }
	var calls []call
	for _, p := range []string{"echo", "echo_azure", "echo_gemini", "echo_entra", "echo_bedrock", "echo_claude", "echo_entra_refused"} {
		for _, status := range []int{400, 429, 500} {
			model := fmt.Sprintf("%s/fail-%d", p, status)
			if p == "echo_bedrock" {
				model = fmt.Sprintf("%s/us.anthropic.fail-%d-v1:0", p, status)
			}
			calls = append(calls, call{"/v1/chat/completions", chat(model, false)}, call{"/v1/chat/completions", chat(model, true)})
		}
	}
	calls = append(calls,
		call{"/v1/chat/completions", chat("echo/ok", false)},
		call{"/v1/chat/completions", chat("echo/ok", true)},
		call{"/v1/chat/completions", chat("echo/stream-error", true)},
		call{"/v1/chat/completions", chat("echo_claude/stream-error", true)},
	)
	for _, status := range []int{400, 429, 500} {
		calls = append(calls, call{"/v1/messages", fmt.Sprintf(`{"model":"echo_claude/fail-%d","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, status)})
	}
	calls = append(calls,
		call{"/v1/messages", `{"model":"echo_claude/ok","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`},
		call{"/v1/messages", `{"model":"echo_claude/stream-error","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		call{"/v1/messages", `{"model":"echo/fail-400","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`},
	)
	quoted := 0
	for _, c := range calls {
		status, body, hdr := request(t, http.MethodPost, gatewayBase+c.path, c.body, "Authorization", "Bearer "+aliceKey)
		what := fmt.Sprintf("%s %s (status %d)", c.path, c.body, status)
		leaks(what+": the body", body)
		for name, v := range hdr {
			leaks(what+": header "+name, strings.Join(v, " "))
		}
		if strings.Contains(body, "the credentials you sent") {
			quoted++
		}
	}
	if quoted < len(calls)/2 {
		t.Errorf("only %d of %d answers pass the provider's message on; the check above proves little", quoted, len(calls))
	}

	// Batch lines fail with the provider's message.
	c := sdk(aliceKey)
	in := uploadLines(t, c, []string{chatLine("b400", "echo/fail-400"), chatLine("b500", "echo/fail-500"), chatLine("b429", "echo_claude/fail-429")})
	b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	b = waitBatch(t, c, b.ID, 30*time.Second, openai.BatchStatusCompleted, openai.BatchStatusFailed)
	errLines := fileLines(t, c, b.ErrorFileID)
	if len(errLines) != 3 {
		t.Errorf("batch error file has %d lines, want 3", len(errLines))
	}
	for id, l := range errLines {
		leaks("batch error line "+id, l.Raw)
		if !strings.Contains(l.Raw, "the credentials you sent") {
			t.Errorf("batch error line %s does not pass the provider's message on: %s", id, l.Raw)
		}
	}

	// Each call reaches the echo provider, but echo_entra_refused's six,
	// which end at the token endpoint; the batch's lines add theirs.
	if n, want := len(g.echo.got()), len(calls)-6+3; n < want {
		t.Fatalf("the echo provider got %d requests, want at least %d", n, want)
	}
	access, other := g.logs(t)
	leaks("the access log", access)
	leaks("Caddy's log", other)
	if !strings.Contains(other, `"msg":"provider failed"`) || !strings.Contains(other, "upstream roundtrip") || !strings.Contains(other, "the credentials you sent") {
		t.Error("Caddy's log lacks the dispatcher's WARN lines, reverse_proxy's debug lines or the provider's message; the check above proves little")
	}
}
