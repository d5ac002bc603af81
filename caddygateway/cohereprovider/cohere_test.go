package cohereprovider

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/caddykit"
	"github.com/modelgate/modelgate/providers/cohere"
	"github.com/modelgate/modelgate/providers/rerank"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"key only", `cohere {
			api_key {env.COHERE_API_KEY}
		}`, `{"api_key":"{env.COHERE_API_KEY}"}`},
		{"every common option", `cohere {
			base_url https://cohere.internal/proxy
			api_key k
			models command-a-03-2025 embed-v4.0 rerank-v3.5
			proxy {
				lb_policy first
			}
		}`, `{"base_url":"https://cohere.internal/proxy","api_key":"k","models":["command-a-03-2025","embed-v4.0","rerank-v3.5"],"proxy":{"load_balancing":{"selection_policy":{"policy":"first"}}}}`},
		{"no key", `cohere {
			base_url https://api.cohere.com
		}`, "error: provider type cohere needs api_key"},
		{"an option of another type", `cohere {
			api_key k
			api_version 2024-10-21
		}`, `error: unrecognized option "api_version" for provider type cohere`},
		{"an argument", `cohere extra {
			api_key k
		}`, "error: wrong argument count"},
	})
}

// TestModule: the registered module serves chat, rerank and embeddings
// with Cohere's translators, provisions against Cohere's public endpoint
// by default and refuses to provision without a key.
func TestModule(t *testing.T) {
	info, err := caddy.GetModule("modelgate.providers.cohere")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := info.New().(caddygateway.Provider)
	if !ok {
		t.Fatalf("%T is not a provider", info.New())
	}
	e := p.Endpoints()
	if _, ok := e.Chat.(cohere.Chat); !ok {
		t.Errorf("chat %T", e.Chat)
	}
	if _, ok := e.Embeddings.(cohere.Embeddings); !ok {
		t.Errorf("embeddings %T", e.Embeddings)
	}
	if f, ok := e.Rerank.(rerank.Format); !ok || f != rerank.Cohere {
		t.Errorf("rerank %#v", e.Rerank)
	}
	if e.Responses != nil || e.Messages != nil {
		t.Errorf("Cohere has no Responses or Messages API to pass through to: %+v", e)
	}

	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MG_TEST_COHERE_KEY", "co-secret")
	withKey := &Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "{env.MG_TEST_COHERE_KEY}"}}
	if err := withKey.Provision(ctx); err != nil {
		t.Fatalf("provision with the default base URL: %v", err)
	}
	if withKey.Base().Key() != "co-secret" {
		t.Errorf("key %q", withKey.Base().Key())
	}
	for _, key := range []string{"", "{env.MG_TEST_COHERE_UNSET}"} {
		p := &Provider{ProviderBase: caddygateway.ProviderBase{APIKey: key}}
		if err := p.Provision(ctx); err == nil || !strings.Contains(err.Error(), "api_key") {
			t.Errorf("api_key %q: %v", key, err)
		}
	}
}
