package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/integration/toyprovider"
)

// TestIntegrationThirdPartyProvider loads a provider type that lives
// outside modelgate's caddygateway tree (integration/toyprovider, written as a
// third party would) from a Caddyfile and serves chat through it with the
// OpenAI SDK: its own wire format, a query string, requests signed over
// their final bytes, a stream framing of its own, and its own error
// mapping, with fallback between two providers of the type.
func TestIntegrationThirdPartyProvider(t *testing.T) {
	const secret = "toy-secret-8d1c"
	fake := &toyprovider.Fake{Signer: toyprovider.Signer{Secret: []byte(secret)}}
	up := httptest.NewServer(fake)
	defer up.Close()
	t.Setenv("MG_TOY_SECRET", secret)
	caddytest.NewTester(t).InitServer(fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	modelgate {
		provider toy toy {
			base_url %[1]s/toy
			signing_secret {env.MG_TOY_SECRET}
			models toy-1
		}
		provider wrongkey toy {
			base_url %[1]s/toy
			signing_secret not-the-secret
		}
		model either toy/busy toy/toy-1
		key alice %[2]s
	}
}
http://localhost:9080 {
	modelgate_auth
	modelgate
}`, up.URL, aliceKey), "caddyfile")
	c := sdk(aliceKey)
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, userChat("toy-1", "hello there"))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0].Message.Content; got != "echo: hello there" || res.Usage.CompletionTokens != 3 || res.Usage.TotalTokens != res.Usage.PromptTokens+3 {
			t.Errorf("content %q, usage %+v", got, res.Usage)
		}
	})

	t.Run("stream in the toy's own framing", func(t *testing.T) {
		p := userChat("toy/toy-1", "stream me")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for s.Next() {
			acc.AddChunk(s.Current())
			chunks++
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != "echo: stream me" || chunks != 5 || acc.Usage.CompletionTokens != 3 {
			t.Errorf("content %q in %d chunks, usage %+v", got, chunks, acc.Usage)
		}
	})

	t.Run("its error mapping, and routing", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, userChat("toy/busy", "hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "overloaded" {
			t.Fatalf("busy: %v", err)
		}
		// The busy target said when to come back (in a header of its own,
		// which its translator reads): the alias that lists it skips it
		// until then, and its next target answers.
		before := fake.Requests.Load()
		res, err := c.Chat.Completions.New(ctx, userChat("either", "again"))
		if err != nil || res.Choices[0].Message.Content != "echo: again" || fake.Requests.Load()-before != 1 {
			t.Fatalf("routing: %v (%d requests)", err, fake.Requests.Load()-before)
		}
	})

	t.Run("a signature the provider refuses", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, userChat("wrongkey/toy-1", "hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Code != "upstream_auth_failed" {
			t.Fatalf("%v", err)
		}
	})
}
