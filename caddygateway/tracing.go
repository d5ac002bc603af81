package caddygateway

import (
	"net/url"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/gateway"
)

// TracingConfig says what the gateway's spans hold (see docs/tracing.md).
// The spans themselves are made under the span of Caddy's tracing handler,
// placed in the route before modelgate, which exports them as the
// OTEL_* environment variables say: without it, or for a request its
// sampler leaves out, the gateway makes no span.
type TracingConfig struct {
	// CaptureContent records prompts and answers in the spans: the body
	// sent to each provider (after the guards masked it) and the answer
	// the client got (after the guards). Default: off.
	CaptureContent bool `json:"capture_content,omitempty"`
}

// UnmarshalCaddyfile reads a tracing block. Syntax:
//
//	tracing {
//	    capture_content
//	}
func (t *TracingConfig) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "capture_content":
			if d.NextArg() {
				return d.ArgErr()
			}
			t.CaptureContent = true
		default:
			return d.Errf("unrecognized tracing option %q (want capture_content)", d.Val())
		}
	}
	return nil
}

// gateway is the core's tracing configuration of t (nil: the defaults).
func (t *TracingConfig) gateway() gateway.Tracing {
	if t == nil {
		return gateway.Tracing{}
	}
	return gateway.Tracing{CaptureContent: t.CaptureContent}
}

// serverAddress is the host and port of a provider's base URL u, as the
// spans of the calls sent to it name them (server.address, server.port):
// the port the URL names, else its scheme's.
func serverAddress(u *url.URL) (string, int) {
	if u == nil {
		return "", 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 443
		if u.Scheme == "http" {
			port = 80
		}
	}
	return u.Hostname(), port
}
