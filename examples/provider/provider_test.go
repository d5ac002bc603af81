package quillprovider_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	_ "github.com/modelgate/modelgate" // modelgate's modules, as a caddy built with it has them
	"github.com/modelgate/modelgate/caddykit"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/providertest"

	quillprovider "example.com/modelgate-provider-quill"
	"example.com/modelgate-provider-quill/quilltest"
)

// TestMain keeps the Caddy that the gateway test runs out of the user's
// Caddy directories.
func TestMain(m *testing.M) { os.Exit(caddykit.Main(m)) }

func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(quillprovider.Provider) }, []struct{ Name, In, Want string }{
		{"key and secret", `quill {
			key_id {env.QUILL_KEY_ID}
			secret {env.QUILL_SECRET}
			models quill-1 quill-mini
		}`, `{"models":["quill-1","quill-mini"],"key_id":"{env.QUILL_KEY_ID}","secret":"{env.QUILL_SECRET}"}`},
		{"base_url and proxy", `quill {
			base_url https://eu.quill.example
			key_id k
			secret s
			proxy {
				lb_policy round_robin
			}
		}`, `{"base_url":"https://eu.quill.example","proxy":{"load_balancing":{"selection_policy":{"policy":"round_robin"}}},"key_id":"k","secret":"s"}`},
		{"no secret", `quill {
			key_id k
		}`, "error: needs key_id and secret"},
		{"api_key", `quill {
			key_id k
			secret s
			api_key x
		}`, "error: not api_key"},
		{"an unknown option", `quill {
			colour blue
		}`, `error: unrecognized option "colour" for provider type quill`},
		{"two secrets", `quill {
			key_id k
			secret s t
		}`, "error: wrong argument count"},
	})
}

// app is the modelgate block of a gateway whose provider quill is the
// fake at fakeURL; its second provider, wrongkey, signs with another
// secret.
func app(fakeURL string) string {
	return fmt.Sprintf(`provider quill quill {
	base_url %[1]s/quill
	key_id kid-1
	secret {env.QUILL_TEST_SECRET}
	models quill-1
}
provider wrongkey quill {
	base_url %[1]s/quill
	key_id kid-1
	secret not-the-secret
}
model either quill/fail-529 quill/quill-1`, fakeURL)
}

func TestCaddyfileAdapts(t *testing.T) {
	got := caddykit.Provider(t, caddykit.Caddyfile(app("http://127.0.0.1:1")), "quill")
	want := `{"base_url":"http://127.0.0.1:1/quill","key_id":"kid-1","models":["quill-1"],"secret":"{env.QUILL_TEST_SECRET}","type":"quill"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	caddykit.AdaptError(t, caddykit.Caddyfile(`provider q quill {
	key_id k
}`), "needs key_id and secret")
}

// TestGateway serves chat through a gateway whose provider is Quill's
// fake: the request reaches the fake signed and in Quill's format, and
// the answer, whole or streamed, comes back unified; Quill's errors map,
// and a fallback takes the next target.
func TestGateway(t *testing.T) {
	const secret = "quill-secret-51c9"
	fake := providertest.Start(t, providertest.Options{Keys: map[string]string{"quill": "kid-1:" + secret}})
	t.Setenv("QUILL_TEST_SECRET", secret)
	g := caddykit.Start(t, app(fake.URL))

	t.Run("chat", func(t *testing.T) {
		res, body := g.Chat(t, `{"model":"quill-1","messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"hello there"}]}`)
		if res.StatusCode != 200 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		providerkit.CheckCompletion(t, body)
		if got := gjson.GetBytes(body, "choices.0.message.content").Str; got != "echo: hello there" {
			t.Errorf("content %q", got)
		}
		providerkit.CheckUsage(t, gjson.GetBytes(body, "usage").Raw, providerkit.Usage{Prompt: 4, Completion: 3, Total: 7})
		last := fake.Requests()[len(fake.Requests())-1]
		if last.Format != "quill" || last.Path != quilltest.Path || last.Header.Get("X-Quill-Signature") == "" ||
			last.Header.Get("Authorization") != "" || strings.Contains(string(last.Body), "messages") {
			t.Errorf("the fake got %s %s %v %s", last.Format, last.Path, last.Header, last.Body)
		}
	})

	t.Run("stream", func(t *testing.T) {
		res, body := g.Chat(t, `{"model":"quill/quill-1","messages":[{"role":"user","content":"stream me please"}],"stream":true,"stream_options":{"include_usage":true}}`)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		opts := providers.StreamOptions{IncludeUsage: true}
		providerkit.CheckUnifiedStream(t, body, opts)
		acc := providerkit.Accumulate(t, body)
		if got := acc.Choices[0].Message.Content; got != "echo: stream me please" || !acc.Done || acc.Usage.CompletionTokens != 4 {
			t.Errorf("content %q, usage %+v:\n%s", got, acc.Usage, body)
		}
	})

	t.Run("a stream that fails midway", func(t *testing.T) {
		_, body := g.Chat(t, `{"model":"quill/midstream-error","messages":[{"role":"user","content":"one two three"}],"stream":true}`)
		data := providerkit.Data(body)
		if msg := providerkit.ValidUnifiedStream(body); msg != "" || len(data) == 0 ||
			gjson.GetBytes(data[len(data)-1], "error.code").Str != "overloaded" {
			t.Errorf("%s\n%s", msg, body)
		}
	})

	t.Run("errors map", func(t *testing.T) {
		for model, want := range map[string]struct {
			status int
			code   string
		}{
			"quill/fail-429":   {429, "rate_limit_exceeded"},
			"quill/fail-529":   {503, "overloaded"},
			"wrongkey/quill-1": {502, "upstream_auth_failed"},
		} {
			res, body := g.Chat(t, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
			if res.StatusCode != want.status || gjson.GetBytes(body, "error.code").Str != want.code {
				t.Errorf("%s: %d %s, want %d %s", model, res.StatusCode, body, want.status, want.code)
			}
		}
	})

	t.Run("fallback", func(t *testing.T) {
		before := len(fake.Requests())
		res, body := g.Chat(t, `{"model":"either","messages":[{"role":"user","content":"again"}]}`)
		if res.StatusCode != 200 || gjson.GetBytes(body, "choices.0.message.content").Str != "echo: again" || len(fake.Requests())-before != 2 {
			t.Errorf("%d %s after %d requests", res.StatusCode, body, len(fake.Requests())-before)
		}
	})
}
