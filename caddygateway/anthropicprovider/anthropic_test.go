package anthropicprovider

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddykit"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"options", `anthropic {
			api_key k
			max_tokens 1024
			version 2023-06-01
			batch gateway
		}`, `{"api_key":"k","max_tokens":1024,"version":"2023-06-01","batch":"gateway"}`},
		{"batch unknown", `anthropic {
			api_key k
			batch maybe
		}`, `error: batch must be native or gateway, not "maybe"`},
	})
}

func TestBatchMode(t *testing.T) {
	if got := (&Provider{}).BatchMode(); got != batch.ModeNative {
		t.Errorf("default batch mode %q, want native", got)
	}
	if got := (&Provider{Batch: batch.ModeGateway}).BatchMode(); got != batch.ModeGateway {
		t.Errorf("batch mode %q, want gateway", got)
	}
}
