package caddykit

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	_ "github.com/modelgate/modelgate" // the modules a gateway runs
	"github.com/modelgate/modelgate/caddygateway/anthropicprovider"
	"github.com/modelgate/modelgate/providers/providerkit"
)

func newAnthropic() caddyfile.Unmarshaler { return new(anthropicprovider.Provider) }

// TestUnmarshal checks a provider block against its JSON and an error,
// and shows Unmarshal failing on other JSON, another error and no error.
func TestUnmarshal(t *testing.T) {
	Run(t, newAnthropic, []struct{ Name, In, Want string }{
		{"options", "anthropic {\n\tapi_key k\n\tmax_tokens 10\n}", `{"api_key":"k","max_tokens":10}`},
		{"an unknown option", "anthropic {\n\tcolour blue\n}", `error: unrecognized option "colour"`},
	})
	for _, tc := range []struct{ name, in, want string }{
		{"other JSON", "anthropic {\n\tapi_key k\n}", `{"api_key":"other"}`},
		{"another error", "anthropic {\n\tcolour blue\n}", "error: no such thing"},
		{"no error", "anthropic {\n\tapi_key k\n}", "error: unrecognized"},
		{"an error", "anthropic {\n\tcolour blue\n}", `{"api_key":"k"}`},
	} {
		if failed, _ := providerkit.Failures(t, func(tb testing.TB) { Unmarshal(tb, newAnthropic(), tc.in, tc.want) }); !failed {
			t.Errorf("%s: Unmarshal passed", tc.name)
		}
	}
}

const twoProviders = `{
	modelgate {
		provider claude anthropic {
			api_key {env.ANTHROPIC_API_KEY}
			models claude-haiku-4-5
		}
		provider my.provider openai {
			api_key k
		}
	}
}
:8080 {
	modelgate
}
`

func TestProvider(t *testing.T) {
	for name, want := range map[string]string{
		"claude":      `{"api_key":"{env.ANTHROPIC_API_KEY}","models":["claude-haiku-4-5"],"type":"anthropic"}`,
		"my.provider": `{"api_key":"k","type":"openai"}`,
	} {
		if got := Provider(t, twoProviders, name); string(got) != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if failed, _ := providerkit.Failures(t, func(tb testing.TB) { Provider(tb, twoProviders, "nobody") }); !failed {
		t.Error("Provider passed for a provider the Caddyfile does not have")
	}
}

func TestAdaptError(t *testing.T) {
	bad := strings.Replace(twoProviders, "openai", "no-such-type", 1)
	AdaptError(t, bad, "no-such-type")
	if failed, _ := providerkit.Failures(t, func(tb testing.TB) { AdaptError(tb, twoProviders, "x") }); !failed {
		t.Error("AdaptError passed for a Caddyfile that adapts")
	}
	if failed, _ := providerkit.Failures(t, func(tb testing.TB) { Adapt(tb, bad) }); !failed {
		t.Error("Adapt passed for a Caddyfile that does not adapt")
	}
}

// TestCaddyfile adapts the Caddyfile Start runs: its app block, the
// key, the site.
func TestCaddyfile(t *testing.T) {
	out := string(Adapt(t, Caddyfile("provider oa openai {\n\tapi_key k\n}\nmodel fast oa/gpt-4o-mini")))
	for _, want := range []string{`"oa": {`, `"fast"`, `"name": "kit"`, `"localhost"`, `"handler": "modelgate"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the adapted Caddyfile lacks %s:\n%s", want, out)
		}
	}
}
