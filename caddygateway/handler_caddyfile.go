package caddygateway

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("modelgate_auth", parseAuthCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_auth", httpcaddyfile.After, "basic_auth")
	httpcaddyfile.RegisterHandlerDirective("modelgate", parseHandlerCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("modelgate", httpcaddyfile.Before, "reverse_proxy")
}

func parseAuthCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Auth)
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return a, err
}

// UnmarshalCaddyfile sets up the auth handler. Syntax:
//
//	modelgate_auth [<matcher>]
func (h *Auth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("modelgate_auth takes no options; keys are configured in the modelgate global option")
	}
	return nil
}

func parseHandlerCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the unified API handler. Syntax:
//
//	modelgate [<matcher>] {
//	    max_request_body <size>
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "max_request_body":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 {
				return d.Errf("max_request_body: %q is not a size such as 16MiB", s)
			}
			h.MaxRequestBody = int64(n)
		default:
			return d.Errf("unrecognized modelgate option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*Auth)(nil)
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
)
