package gemini

import (
	"testing"

	"github.com/modelgate/modelgate/caddymodule/provider/internal/caddyfiletest"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // JSON of the provider, or an error substring after "error: "
	}{
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			caddyfiletest.Unmarshal(t, new(Provider), tc.in, tc.want)
		})
	}
}
