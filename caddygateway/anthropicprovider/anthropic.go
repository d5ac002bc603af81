// Package anthropicprovider is the Caddy module of the anthropic provider type,
// modelgate.providers.anthropic: Anthropic's Messages API behind the
// translator of package providers/anthropic.
package anthropicprovider

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is a provider that speaks Anthropic's Messages API. Unified chat
// requests are translated into Messages requests and the answers, streamed
// or not, back into chat completions. The key is sent as "x-api-key".
type Provider struct {
	caddygateway.ProviderBase

	// MaxTokens is the max_tokens sent when the client sets neither
	// max_completion_tokens nor max_tokens (Anthropic requires one).
	// Default: 4096.
	MaxTokens int `json:"max_tokens,omitempty"`

	// Version is the anthropic-version header. Default: 2023-06-01.
	Version string `json:"version,omitempty"`

	// Batch is where batches send this provider's lines: "native", to
	// its own batch API at its batch price, or "gateway", as live
	// requests. Default: native.
	Batch string `json:"batch,omitempty"`

	chat *anthropic.Chat
}

// providerType describes the type to the host.
var providerType = caddygateway.ProviderType{
	Name:        "anthropic",
	BaseURL:     "https://api.anthropic.com",
	KeyRequired: true,
	KeyHeader:   "x-api-key",
}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.anthropic",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision sets up the translator and the reverse proxy to the provider.
func (p *Provider) Provision(ctx caddy.Context) error {
	p.chat = &anthropic.Chat{MaxTokens: p.MaxTokens, Version: p.Version}
	return p.ProvisionBase(ctx, providerType)
}

// UnmarshalCaddyfile reads an Anthropic provider block. Syntax:
//
//	provider <name> anthropic {
//	    base_url   <url>
//	    api_key    <secret>
//	    models     <model>...
//	    max_tokens <n>
//	    version    <anthropic-version>
//	    batch      native|gateway
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
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
		case "batch":
			return true, caddygateway.ParseBatchMode(d, &p.Batch)
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

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Anthropic serves chat, and the
// Messages API passes through.
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat, Messages: anthropic.Native{Version: p.Version}}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
	_ caddygateway.Provider = (*Provider)(nil)
)

// BatchMode is where batches send the provider's lines: its Batch
// option, else the type's default (native: its API has batches).
func (p *Provider) BatchMode() string { return caddygateway.BatchMode(p.Batch, providerType.Name) }

// NativeBatches returns Anthropic's Message Batches API, whose requests
// are translated as live ones (max_tokens, anthropic-version): the
// provider's lines go there while its batch mode is native.
func (p *Provider) NativeBatches(send providers.Send) batch.NativeAPI {
	return anthropic.Batches{Send: send, Chat: *p.chat}
}

var _ caddygateway.NativeBatcher = (*Provider)(nil)
