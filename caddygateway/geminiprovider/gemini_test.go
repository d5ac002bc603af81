package geminiprovider

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddykit"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"batch gateway", `gemini {
			api_key k
			batch gateway
		}`, `{"api_key":"k","batch":"gateway"}`},
		{"batch unknown", `gemini {
			api_key k
			batch later
		}`, `error: batch must be native or gateway, not "later"`},
		{"batch without a mode", `gemini {
			api_key k
			batch
		}`, `error: wrong argument count`},
		{"key", `gemini {
			api_key {env.GEMINI_API_KEY}
		}`, `{"api_key":"{env.GEMINI_API_KEY}"}`},
		{"every common option", `gemini {
			base_url https://generativelanguage.googleapis.com/v1alpha
			api_key k
			models gemini-2.5-flash gemini-embedding-001
		}`, `{"base_url":"https://generativelanguage.googleapis.com/v1alpha","api_key":"k","models":["gemini-2.5-flash","gemini-embedding-001"]}`},
		{"no key", `gemini {
			models gemini-2.5-flash
		}`, "error: provider type gemini needs api_key"},
		{"no block", `gemini`, "error: provider type gemini needs api_key"},
		{"a Vertex option", `gemini {
			api_key k
			project p
		}`, `error: unrecognized option "project" for provider type gemini`},
	})
}
