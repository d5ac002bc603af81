package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers/providertest"
)

// providerRow is one provider type (or surface of one) as the
// per-provider battery sees it: the provider's name in
// testdata/caddyfiles/providers.Caddyfile and what it can do.
type providerRow struct {
	provider string
	model    string // the model the fake is asked for (a scripted name replaces it)
	// structured: response_format json_schema is honoured (else 400
	// unsupported_parameter).
	structured bool
}

// providerRows are every provider type's rows. A new provider type adds
// its provider block to providers.Caddyfile and a row here.
var providerRows = []providerRow{
	{provider: "openai", model: "gpt-4o", structured: true},
	{provider: "anthropic", model: "claude-sonnet-4-5", structured: true},
	{provider: "azure", model: "gpt-4o", structured: true},
	{provider: "azure_v1", model: "prod-gpt-4o", structured: true},
	{provider: "azure_entra", model: "prod-gpt-4o", structured: true},
	{provider: "bedrock", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", structured: true},
	{provider: "bedrock_env", model: "amazon.nova-pro-v1:0", structured: true},
	{provider: "bedrock_apikey", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", structured: true},
	{provider: "cohere", model: "command-a-03-2025", structured: true},
	{provider: "gemini", model: "gemini-2.5-flash", structured: true},
	{provider: "vertex", model: "gemini-2.5-flash", structured: true},
}

// entraServer is a Microsoft Entra ID token endpoint for the azure_entra
// provider: it counts the tokens it issues, each valid for an hour.
type entraServer struct{ issued atomic.Int64 }

func (s *entraServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if r.URL.Path != "/test-tenant/oauth2/v2.0/token" || r.Form.Get("client_secret") != "entra-secret" || r.Form.Get("client_id") != "test-client" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	n := s.issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "entra-token-" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": 3600})
}

// startProviders starts the fake provider, the Entra token endpoint and
// the gateway of providers.Caddyfile.
func startProviders(t *testing.T) (*providertest.Server, *entraServer) {
	t.Helper()
	const providerKey = "sk-test-every-provider-3b1e"
	fake := providertest.Start(t, providertest.Options{OpenAIKey: providerKey, AnthropicKey: providerKey,
		Keys: map[string]string{"azure_openai": "", "gemini": providerKey,
			"bedrock": bedrockKeyID + ":" + bedrockSecret + ":" + bedrockToken, "bedrock_api_key": bedrockAPIKey},
		// Vertex's access tokens are replaced TokenEarlyExpiry before
		// they expire: these are replaced 3 s after they are issued.
		GoogleTokenLifetime: caddygateway.TokenEarlyExpiry + vertexTokenFresh})
	setBedrockEnv(t)
	entra := &entraServer{}
	es := httptest.NewServer(entra)
	t.Cleanup(es.Close)
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_ENTRA", es.URL)
	t.Setenv("MG_ENTRA_SECRET", "entra-secret")
	t.Setenv("MG_PROVIDER_KEY", providerKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	saFile := filepath.Join(t.TempDir(), "vertex-sa.json")
	if err := os.WriteFile(saFile, fake.GoogleServiceAccount(""), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MG_VERTEX_CREDENTIALS", saFile)
	cfg, err := os.ReadFile("../testdata/caddyfiles/providers.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return fake, entra
}

// TestIntegrationProviders runs the same battery through every provider
// type with the OpenAI SDK: chat, a stream that accumulates to the same
// answer with usage, a tool loop streamed and not, structured output with
// the SDK's parse, the provider's errors mapped, a mid-stream failure the
// SDK raises, and a batch line.
func TestIntegrationProviders(t *testing.T) {
	fake, entra := startProviders(t)
	c := sdk(aliceKey)
	ctx := context.Background()
	for _, row := range providerRows {
		model := row.provider + "/" + row.model
		t.Run(row.provider, func(t *testing.T) {
			t.Run("chat", func(t *testing.T) {
				res, err := c.Chat.Completions.New(ctx, userChat(model, "hello there"))
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Choices[0].Message.Content; got != "echo: hello there" || res.Choices[0].FinishReason != "stop" {
					t.Errorf("content %q, finish %q", got, res.Choices[0].FinishReason)
				}
				if u := res.Usage; u.CompletionTokens != 3 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
					t.Errorf("usage %+v", u)
				}
			})

			t.Run("stream equals the answer, with usage", func(t *testing.T) {
				p := userChat(model, "stream this please")
				want, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				acc := accumulate(t, c.Chat.Completions.NewStreaming(ctx, p))
				if got := acc.Choices[0].Message.Content; got != want.Choices[0].Message.Content || acc.Choices[0].FinishReason != "stop" {
					t.Errorf("streamed %q (%s), answered %q", got, acc.Choices[0].FinishReason, want.Choices[0].Message.Content)
				}
				if acc.Usage.TotalTokens != want.Usage.TotalTokens || acc.Usage.CompletionTokens != want.Usage.CompletionTokens {
					t.Errorf("stream usage %+v, answer usage %+v", acc.Usage, want.Usage)
				}
			})

			t.Run("tool loop", func(t *testing.T) {
				p := userChat(model, "weather in Paris")
				p.Tools = []openai.ChatCompletionToolUnionParam{searchTool}
				res, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				calls := res.Choices[0].Message.ToolCalls
				if len(calls) != 1 || calls[0].ID == "" || calls[0].Function.Name != "search" || res.Choices[0].FinishReason != "tool_calls" ||
					gjson.Get(calls[0].Function.Arguments, "query").Str != "weather in Paris" {
					t.Fatalf("calls %+v, finish %q", calls, res.Choices[0].FinishReason)
				}
				acc := accumulate(t, c.Chat.Completions.NewStreaming(ctx, p))
				sc := acc.Choices[0].Message.ToolCalls
				if len(sc) != 1 || sc[0].Function.Name != "search" || sc[0].Function.Arguments != calls[0].Function.Arguments || acc.Choices[0].FinishReason != "tool_calls" {
					t.Fatalf("streamed calls %+v", sc)
				}
				// The result goes back in the provider's own shape and the
				// loop ends with text.
				p.Messages = append(p.Messages, res.Choices[0].Message.ToParam(), openai.ToolMessage("sunny, 21 C", calls[0].ID))
				final, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if got := final.Choices[0].Message.Content; got != "tool said: sunny, 21 C" {
					t.Errorf("after the tool: %q", got)
				}
			})

			t.Run("structured output", func(t *testing.T) {
				p := userChat(model, "describe Paris")
				p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
					JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "city", Strict: openai.Bool(true),
						Schema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"summary", "words"},
							"properties": map[string]any{"summary": map[string]any{"type": "string"}, "words": map[string]any{"type": "integer"}}}}}}
				res, err := c.Chat.Completions.New(ctx, p)
				if !row.structured {
					var apiErr *openai.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" {
						t.Fatalf("want 400 unsupported_parameter, got %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var city struct {
					Summary string `json:"summary"`
					Words   int    `json:"words"`
				}
				if err := json.Unmarshal([]byte(res.Choices[0].Message.Content), &city); err != nil || city.Summary != "echo: describe Paris" || city.Words != 3 {
					t.Errorf("content %q parsed %+v (%v)", res.Choices[0].Message.Content, city, err)
				}
			})

			t.Run("errors", func(t *testing.T) {
				var apiErr *openai.Error
				_, err := c.Chat.Completions.New(ctx, userChat(row.provider+"/fail-429", "hi"))
				if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") == "" {
					t.Errorf("fail-429: %v", err)
				}
				_, err = c.Chat.Completions.New(ctx, userChat(row.provider+"/fail-500", "hi"))
				if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 {
					t.Errorf("fail-500: %v", err)
				}
				s := c.Chat.Completions.NewStreaming(ctx, userChat(row.provider+"/midstream-error", "hi there"))
				for s.Next() {
				}
				if s.Err() == nil {
					t.Error("a stream that failed mid-way ended without an error the SDK raises")
				}
				// A provider that closes its stream cleanly after one
				// event, before its end ([DONE], message_stop, …): passed
				// through or translated, the client must be able to tell
				// it from a whole answer.
				s = c.Chat.Completions.NewStreaming(ctx, userChat(row.provider+"/cutoff", "hi there"))
				for s.Next() {
				}
				if err := s.Err(); err == nil || !strings.Contains(err.Error(), "stream_incomplete") {
					t.Errorf("a stream the provider closed before its end: %v", err)
				}
			})

			t.Run("batch line", func(t *testing.T) {
				f := uploadLines(t, c, []string{chatLine("b1", model)})
				b := waitBatch(t, c, newBatch(t, c, f.ID, "/v1/chat/completions").ID, 20*time.Second, "completed", "failed")
				out := fileLines(t, c, b.OutputFileID)
				if b.Status != "completed" || out["b1"].Get("response.body.choices.0.message.content").Str != "echo: b1 says hi" {
					t.Errorf("batch %s: %v", b.Status, out)
				}
			})
		})
	}

	t.Run("azure requests", func(t *testing.T) {
		var paths []string
		for _, r := range fake.Requests() {
			if r.Format == "azure_openai" {
				paths = append(paths, r.Path+" "+r.Header.Get("Api-Key")+" "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			}
		}
		joined := strings.Join(paths, "\n")
		for _, want := range []string{"/openai/deployments/prod-gpt-4o/chat/completions sk-test", "/openai/v1/chat/completions sk-test", "/openai/v1/chat/completions  entra-token-1"} {
			if !strings.Contains(joined, want) {
				t.Errorf("no azure request like %q in\n%s", want, joined)
			}
		}
		if n := entra.issued.Load(); n != 1 {
			t.Errorf("Entra issued %d tokens for one config; a token valid for an hour is reused", n)
		}
	})
}

// vertexTokenFresh is how long a Vertex access token of the fake is used
// before the gateway replaces it (its lifetime is TokenEarlyExpiry longer).
const vertexTokenFresh = 3 * time.Second

// TestIntegrationGoogleCredentials: the gateway authenticates to Vertex AI
// with the service account's access tokens, each reused while it has more
// than caddygateway.TokenEarlyExpiry to live and replaced while it is still
// valid; every request Vertex saw carried a token the fake issued and that
// had not expired. A Gemini key Google refuses (with a 400) is the
// gateway's 502, not a 401 that would blame the client's key.
func TestIntegrationGoogleCredentials(t *testing.T) {
	fake, _ := startProviders(t)
	c := sdk(aliceKey)
	ctx := context.Background()

	var apiErr *openai.Error
	_, err := c.Chat.Completions.New(ctx, userChat("gemini_wrong_key/gemini-2.5-flash", "hello"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != "upstream_auth_failed" || strings.Contains(apiErr.Message, "not-the-fake-key") {
		t.Errorf("a wrong Gemini key: %v", err)
	}
	chat := func() string {
		t.Helper()
		before := len(fake.Requests())
		if _, err := c.Chat.Completions.New(ctx, userChat("vertex/gemini-2.5-flash", "hello")); err != nil {
			t.Fatal(err)
		}
		var sent []providertest.Recorded
		for _, r := range fake.Requests()[before:] {
			if r.Path != providertest.GoogleTokenPath {
				sent = append(sent, r)
			}
		}
		if len(sent) != 1 || !strings.HasPrefix(sent[0].Path, "/v1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:") {
			t.Fatalf("vertex requests %+v", sent)
		}
		return strings.TrimPrefix(sent[0].Header.Get("Authorization"), "Bearer ")
	}
	issued := func(tok string) providertest.GoogleToken {
		t.Helper()
		for _, g := range fake.GoogleTokens() {
			if g.Token == tok {
				return g
			}
		}
		t.Fatalf("Vertex got a token the fake never issued: %q", tok)
		return providertest.GoogleToken{}
	}

	first := chat()
	if got := issued(first); got.Email == "" {
		t.Fatalf("token %+v", got)
	}
	for range 3 {
		if again := chat(); again != first {
			t.Fatalf("a fresh token was not reused: %s, then %s", first, again)
		}
	}
	if n := len(fake.GoogleTokens()); n != 1 {
		t.Fatalf("%d token requests for 4 chats within a token's life", n)
	}
	time.Sleep(vertexTokenFresh + 200*time.Millisecond)
	second := chat()
	old := issued(first)
	if second == first || len(fake.GoogleTokens()) != 2 {
		t.Fatalf("a token with less than %v to live was not replaced: %s, then %s", caddygateway.TokenEarlyExpiry, first, second)
	}
	if !time.Now().Before(old.Expiry) {
		t.Errorf("the first token was replaced only after it expired (%v)", old.Expiry)
	}
	if third := chat(); third != second || len(fake.GoogleTokens()) != 2 {
		t.Errorf("the new token was not reused: %s", third)
	}
	for _, r := range fake.Requests() {
		if r.Format != "vertex" || r.Path == providertest.GoogleTokenPath {
			continue
		}
		g := issued(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if r.At.Before(g.Issued) || !r.At.Before(g.Expiry) {
			t.Errorf("%s at %v carried a token valid from %v to %v", r.Path, r.At, g.Issued, g.Expiry)
		}
	}
}

// accumulate reads a stream to its end with the SDK's accumulator.
func accumulate(t *testing.T, s interface {
	Next() bool
	Current() openai.ChatCompletionChunk
	Err() error
}) openai.ChatCompletionAccumulator {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) == 0 {
		t.Fatal("the stream had no choices")
	}
	return acc
}
