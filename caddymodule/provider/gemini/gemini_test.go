package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
			var p Provider
			err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(p)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
