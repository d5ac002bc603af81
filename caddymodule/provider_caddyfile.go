package caddymodule

import (
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// unmarshalProxy reads a "proxy { … }" block with reverse_proxy's own
// Caddyfile parser, so every reverse_proxy subdirective works there
// (to, lb_policy, health_uri, transport http { … }, …); handle_response is
// not supported.
func unmarshalProxy(d *caddyfile.Dispenser) (json.RawMessage, error) {
	rp := new(reverseproxy.Handler)
	seg := d.NewFromNextSegment()
	if err := rp.UnmarshalCaddyfile(seg); err != nil {
		return nil, err
	}
	if len(rp.HandleResponse) > 0 {
		return nil, d.Err("proxy: handle_response is not supported in a provider's proxy block")
	}
	return json.Marshal(rp)
}

// UnmarshalCaddyfile reads an Anthropic provider block. Syntax:
//
//	provider <name> anthropic {
//	    base_url   <url>
//	    api_key    <secret>
//	    models     <model>...
//	    max_tokens <n>
//	    version    <anthropic-version>
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Anthropic) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.unmarshalCaddyfile(d, providerDefaults{typeName: "anthropic", keyNeeded: true},
		func(d *caddyfile.Dispenser) (bool, error) {
			switch d.Val() {
			case "max_tokens":
				var s string
				if !d.AllArgs(&s) {
					return true, d.ArgErr()
				}
				n, err := strconv.Atoi(s)
				if err != nil || n < 1 {
					return true, d.Errf("max_tokens must be a positive integer, not %q", s)
				}
				p.MaxTokens = n
			case "version":
				if !d.AllArgs(&p.Version) {
					return true, d.ArgErr()
				}
			default:
				return false, nil
			}
			return true, nil
		})
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*Anthropic)(nil)
)
